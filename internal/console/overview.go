package console

import (
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The overview: the state of the inbox at one instant (API.Stats, one
// snapshot), with the window's charts.

type overviewData struct {
	*operations.Stats
	// Received (accepted and refused, by cause, stacked) and Processing
	// (processed, failed, dead-lettered, lines) over the window, cut into
	// buckets of Width; Charted: the API sent the charts.
	Received, Processing chart
	Width                operations.Span
	Charted              bool
	// Note says what a pause or a resume just did (pauseNote).
	Note string
}

func (d overviewData) at() time.Time { return d.At }

func (s *Server) overview(w http.ResponseWriter, r *http.Request) error {
	st, err := s.api.Stats(r.Context(), operations.StatsQuery{Window: s.cfg.Window, Charts: true})
	if err != nil {
		return err
	}
	d := overviewData{Stats: st, Note: pauseNote(r.URL.Query())}
	if c := st.Charts; c != nil {
		d.Received, d.Processing = receivedChart(c), processingChart(c)
		d.Width, d.Charted = operations.Span(c.Width()), true
	}
	return s.render(w, r, nil, "overview", "Overview", d)
}
