package operatorclient_test

import (
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// A pause and a resume round-trip through the client: the viewer counts,
// the operator pauses under its principal, the overview and the events
// read the same both ways, and the refusals keep their causes.
func TestPauseAndResumeThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := remoteSetup(t)
	ctx := t.Context()
	req := operations.PauseRequest{Scope: inbox.PauseSource, Name: "github", Reason: "INC-4"}
	dry := req
	dry.DryRun = true
	direct := must[*operations.PauseResult](t)(f.direct.Pause(ctx, dry))
	same(t, "dry run", direct, must[*operations.PauseResult](t)(f.viewer.Pause(ctx, dry)))
	if _, err := f.viewer.Pause(ctx, req); inbox.CauseOf(err) != inbox.CauseForbidden {
		t.Fatalf("the viewer's pause: %v", err)
	}
	res := must[*operations.PauseResult](t)(f.operator.Pause(ctx, req))
	field.Check(t, "pause", field.Eq("Paused", res.Paused, true), field.Eq("Events", res.Events, direct.Events))
	if _, err := f.operator.Pause(ctx, req); inbox.CauseOf(err) != inbox.CauseAlreadyPaused {
		t.Fatalf("a second pause: %v", err)
	}
	same(t, "stats", must[*operations.Stats](t)(f.direct.Stats(ctx, operations.StatsQuery{})), must[*operations.Stats](t)(f.viewer.Stats(ctx, operations.StatsQuery{})))
	paused := operations.EventQuery{State: string(inbox.StatePaused)}
	same(t, "paused events", must[*operations.EventPage](t)(f.direct.Events(ctx, paused)), must[*operations.EventPage](t)(f.viewer.Events(ctx, paused)))
	st := must[*operations.Stats](t)(f.viewer.Stats(ctx, operations.StatsQuery{}))
	if len(st.Pauses) != 1 || st.Pauses[0].Actor != f.remote.Operator.UserARN {
		t.Fatalf("pauses = %+v", st.Pauses)
	}
	must[*operations.PauseResult](t)(f.operator.Resume(ctx, req))
	if _, err := f.operator.Resume(ctx, req); inbox.CauseOf(err) != inbox.CauseNotPaused {
		t.Fatalf("a second resume: %v", err)
	}
}
