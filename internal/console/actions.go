package console

import (
	"html/template"
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// The operator actions (API.Actions): every action recorded (a requeue,
// a replay, an expunge, a resolve, a discard, a purge...),
// from the console or the CLI, newest first.

type actionsData struct {
	Now     time.Time
	Actions []operations.Action
	// Next is the address of the next (older) page, "" on the last.
	Next  template.URL
	Error string
}

func (d actionsData) at() time.Time { return d.Now }

func (s *Server) actions(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	var d actionsData
	q, err := operatorapi.ParseActions(qs)
	var p *operations.ActionPage
	if err == nil {
		p, err = s.api.Actions(r.Context(), q)
	}
	if err != nil {
		if !inPlace(err) {
			return err
		}
		d.Error = messageOf(err)
		return s.render(w, r, err, "actions", "Operator actions", d)
	}
	d.Now, d.Actions = p.At, p.Actions
	if p.NextBefore != nil {
		q.Before = *p.NextBefore
		d.Next = template.URL("/actions?" + operatorapi.ActionsValues(q).Encode())
	}
	return s.render(w, r, nil, "actions", "Operator actions", d)
}
