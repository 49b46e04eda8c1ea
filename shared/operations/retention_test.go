package operations_test

import (
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// An archive run with a body retention removes the bodies past it; the
// event stays, shown with when its body expired, and reading or replaying
// it is refused with cause body_expired, while a selection of many leaves
// it out. An event within retention reads and replays as ever.
func TestBodyRetentionThroughOperations(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	cfg := *f.arch
	cfg.BodyRetention = 30 * 24 * time.Hour
	act := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct, Archive: &cfg}, operations.Deps{Store: f.store, Blobs: f.blobs}))
	hourAgo := time.Now().Add(-time.Hour)
	old := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", EventID: "evt_old", Body: []byte(`{"id":"evt_old"}`),
		CreatedAt: time.Now().Add(-40 * 24 * time.Hour), State: inbox.StateProcessed, ProcessedAt: &hourAgo})
	kept := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "t", EventID: "evt_new", Body: []byte(`{"id":"evt_new"}`),
		State: inbox.StateProcessed, ProcessedAt: &hourAgo})

	run := must[*operations.ArchiveRunResult](t)(act.ArchiveRun(f.ctx, operations.ArchiveRunRequest{}))
	field.Must(t, "archive run", field.Printed("Events", run.Events, 2), field.Printed("ExpiredObjects", run.ExpiredObjects, 1),
		field.Printed("ExpiredEvents", run.ExpiredEvents, 1))

	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: old.ID}))
	field.Must(t, "expired event", field.Printed("BodyExpiredAt set", d.Event.BodyExpiredAt != nil, true),
		field.Printed("State", d.Event.State, inbox.StateArchived), field.Printed("BodySHA256", d.Event.BodySHA256 != "", true))
	_, err := f.read.EventBody(f.ctx, old.ID)
	cause(t, err, inbox.CauseBodyExpired)
	_, err = act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{ID: old.ID}, DryRun: true})
	cause(t, err, inbox.CauseBodyExpired)
	_, err = act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{ID: old.ID}, Reason: "try"})
	cause(t, err, inbox.CauseBodyExpired)
	many := must[*operations.ReplayResult](t)(act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Source: "s"}, DryRun: true}))
	field.Must(t, "replay of its source", field.Printed("Matched", many.Matched, 0))

	b := must[*operations.Body](t)(f.read.EventBody(f.ctx, kept.ID))
	field.Must(t, "kept body", field.Printed("Bytes", string(b.Bytes), `{"id":"evt_new"}`), field.Printed("From", b.From, operations.BodyFromArchive))
	dry := must[*operations.ReplayResult](t)(act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{ID: kept.ID}, DryRun: true}))
	field.Must(t, "replay of the kept one", field.Printed("Matched", dry.Matched, 1))
}
