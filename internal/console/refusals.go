package console

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// refusalsLimit is how many recent refusal records the page lists.
const refusalsLimit = 100

// causeRow is one cause seen in the window, with its explanation.
type causeRow struct {
	Cause inbox.Cause
	Count int64
	// Known is false for a cause causeNotes does not explain.
	Known bool
	causeNote
}

type refusalsData struct {
	*operations.Refusals
	// Causes are the window's causes, largest first, each explained.
	Causes []causeRow
	Limit  int
}

func (d refusalsData) at() time.Time { return d.At }

// refusals lists the window's refusals by source and cause (API.Refusals,
// one snapshot), what each cause means and what to do, and the newest
// records themselves.
func (s *Server) refusals(w http.ResponseWriter, r *http.Request) error {
	rf, err := s.api.Refusals(r.Context(), operations.RefusalsQuery{Window: s.cfg.Window, Limit: refusalsLimit})
	if err != nil {
		return err
	}
	d := refusalsData{Refusals: rf, Limit: refusalsLimit}
	byCause := map[inbox.Cause]int64{}
	for _, c := range rf.Counts {
		byCause[c.Cause] += c.Count
	}
	for c, n := range byCause {
		note, ok := causeNotes[c]
		d.Causes = append(d.Causes, causeRow{Cause: c, Count: n, Known: ok, causeNote: note})
	}
	slices.SortFunc(d.Causes, func(a, b causeRow) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Cause, b.Cause)) })
	return s.render(w, r, nil, "refusals", "Refusals", d)
}
