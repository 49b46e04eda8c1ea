package console

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
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
	Now    time.Time
	Window time.Duration
	// Counts per source and cause, the suppressed ones included.
	Counts []storage.RejectionCount
	Sum    int64
	// Causes are the window's causes, largest first, each explained.
	Causes []causeRow
	// Recent are the newest records, newest first.
	Recent []inbox.Rejection
	Limit  int
}

func (d refusalsData) at() time.Time { return d.Now }

// refusals lists the window's refusals by source and cause, what each
// cause means and what to do, and the newest records themselves.
func (s *Server) refusals(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := refusalsData{Window: s.cfg.Window, Limit: refusalsLimit}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	since := d.Now.Add(-d.Window)
	if d.Counts, err = s.cfg.Store.RejectionCountByCause(ctx, since); err != nil {
		s.fail(w, err)
		return
	}
	if d.Recent, err = s.cfg.Store.RejectionList(ctx, since, refusalsLimit); err != nil {
		s.fail(w, err)
		return
	}
	byCause := map[inbox.Cause]int64{}
	for _, c := range d.Counts {
		d.Sum += c.Count
		byCause[c.Cause] += c.Count
	}
	for c, n := range byCause {
		note, ok := causeNotes[c]
		d.Causes = append(d.Causes, causeRow{Cause: c, Count: n, Known: ok, causeNote: note})
	}
	slices.SortFunc(d.Causes, func(a, b causeRow) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Cause, b.Cause)) })
	s.render(w, r, http.StatusOK, "refusals", "Refusals", d)
}
