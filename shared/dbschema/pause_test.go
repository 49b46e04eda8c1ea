package dbschema_test

import (
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// webhook_operator pauses and resumes as the API does, each in one
// transaction: the count, the pause's row, the hold of the source's
// events and the action's record; then the pause's removal and the
// release. webhook_operator_read counts and lists, and may not pause.
func TestOperatorPausesAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	factory.Events(ctx, t, storage.New(owner), 2, &factory.EventOpts{Source: "shop"})
	by := inbox.Actor{Name: "ops@test", Reason: "ERP migration"}
	hold := inbox.HoldOf(inbox.PauseSource, "shop")

	asRead := storage.New(pgtest.As(t, owner, migrate.RoleOperatorRead))
	if c, err := asRead.EventCountHeld(ctx, hold, "shop"); err != nil || c.Waiting != 2 {
		t.Fatalf("count as %s: %+v, %v", migrate.RoleOperatorRead, c, err)
	}
	if _, err := asRead.PauseList(ctx); err != nil {
		t.Fatalf("list the pauses as %s: %v", migrate.RoleOperatorRead, err)
	}
	if ok, err := asRead.PauseInsert(ctx, inbox.Pause{Scope: inbox.PauseSource, Name: "shop", Actor: by.Name}); !insufficientPrivilege(err) {
		t.Errorf("pause as %s: %v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, ok, err)
	}
	if n, err := asRead.EventHoldSource(ctx, "shop"); !insufficientPrivilege(err) {
		t.Errorf("hold as %s: %d, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, n, err)
	}

	asOp := storage.New(pgtest.As(t, owner, migrate.RoleOperator))
	for _, pause := range []bool{true, false} {
		tx, err := asOp.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now, err := tx.PGNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.EventCountHeld(ctx, hold, "shop"); err != nil {
			t.Fatalf("count: %v", err)
		}
		var n int
		action := inbox.ActionPause
		if pause {
			if ok, err := tx.PauseInsert(ctx, inbox.Pause{Scope: inbox.PauseSource, Name: "shop", PausedAt: now, Actor: by.Name, Reason: by.Reason}); err != nil || !ok {
				t.Fatalf("pause: %v, %v", ok, err)
			}
			n, err = tx.EventHoldSource(ctx, "shop")
		} else {
			action = inbox.ActionResume
			if _, ok, err := tx.PauseDelete(ctx, inbox.PauseSource, "shop"); err != nil || !ok {
				t.Fatalf("resume: %v, %v", ok, err)
			}
			n, err = tx.EventRelease(ctx, hold, now)
		}
		if err != nil || n != 2 {
			t.Fatalf("%s: %d events, %v", action, n, err)
		}
		if _, err := tx.OperatorActionRecordCounted(ctx, action, by, map[string]string{"scope": "source", "name": "shop"}, n); err != nil {
			t.Fatalf("record the %s: %v", action, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if acts, err := asOp.OperatorActionList(ctx, time.Time{}, 10); err != nil || len(acts) != 2 || acts[0].DBUser != migrate.RoleOperator {
		t.Fatalf("actions: %+v, %v", acts, err)
	}
}
