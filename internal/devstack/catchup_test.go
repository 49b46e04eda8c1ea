package devstack_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// catchUpEnv is a migrated database holding what a restarted dev stack
// finds: events that came before their handler, events of a type still
// without one, and one received while the stack was down.
type catchUpEnv struct {
	pool *pgxpool.Pool // the owner's, to seed and check
	// store is the operator's role, which the dev stack's CatchUp uses.
	store *storage.Store
	// reg routes kind stripe's invoice.paid, a handler "added since".
	reg                 *processor.Registry
	before, still, down []*inbox.Event
}

func setupCatchUp(t *testing.T) *catchUpEnv {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	owner := storage.New(pool)
	e := &catchUpEnv{pool: pool, store: storage.New(pgtest.As(t, pool, migrate.RoleOperator)), reg: processor.NewRegistry()}
	e.reg.HandleFunc(processor.Kind("stripe"), "invoice.paid", func(context.Context, pgx.Tx, *processor.Event) error { return nil })
	unhandled := func(typ string) *factory.EventOpts {
		return &factory.EventOpts{Source: "stripe", SourceKind: "stripe", Type: typ, State: inbox.StateProcessed, Outcome: inbox.OutcomeUnhandled}
	}
	e.before = factory.Events(ctx, t, owner, 2, unhandled("invoice.paid"))
	e.still = factory.Events(ctx, t, owner, 1, unhandled("customer.created"))
	e.down = factory.Events(ctx, t, owner, 1, &factory.EventOpts{Source: "stripe", SourceKind: "stripe", Type: "customer.created"})
	return e
}

// processed reports whether the event is processed, and with what outcome.
func (e *catchUpEnv) processed(t *testing.T, ev *inbox.Event) (bool, string) {
	t.Helper()
	var done bool
	var outcome string
	if err := e.pool.QueryRow(t.Context(), `SELECT processed_at IS NOT NULL, coalesce(outcome, '') FROM webhook_events WHERE id = $1`, ev.ID).Scan(&done, &outcome); err != nil {
		t.Fatal(err)
	}
	return done, outcome
}

// TestCatchUpReplaysWhatNowHasAHandler: at start-up the dev stack counts
// the backlog, and replays, as the operator's role, exactly the unhandled
// events whose route has a handler now, in one line naming them; those of
// a type still without a handler stay as they are.
func TestCatchUpReplaysWhatNowHasAHandler(t *testing.T) {
	t.Parallel()
	e := setupCatchUp(t)
	var out bytes.Buffer
	if err := devstack.CatchUp(t.Context(), &out, e.store, e.reg, true); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "backlog: 1 events wait to be processed") {
		t.Errorf("no backlog line:\n%s", got)
	}
	if !strings.Contains(got, "replayed 2 events now handled by a handler registered since they came: stripe invoice.paid (2)") {
		t.Errorf("no replay line:\n%s", got)
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("%d lines, want 2:\n%s", n, got)
	}
	for _, ev := range e.before {
		if done, outcome := e.processed(t, ev); done || outcome != "" {
			t.Errorf("event %d (invoice.paid, now handled): processed=%v outcome=%q, want due again", ev.ID, done, outcome)
		}
	}
	if done, outcome := e.processed(t, e.still[0]); !done || outcome != string(inbox.OutcomeUnhandled) {
		t.Errorf("event %d (customer.created, still no handler): processed=%v outcome=%q, want unhandled", e.still[0].ID, done, outcome)
	}
	var actor string
	if err := e.pool.QueryRow(t.Context(), `SELECT actor FROM webhook_operator_actions ORDER BY id DESC LIMIT 1`).Scan(&actor); err != nil || actor != devstack.CatchUpActor {
		t.Errorf("the replay's record: actor %q, %v; want %q", actor, err, devstack.CatchUpActor)
	}

	// A second start finds nothing more to replay: one line, the backlog.
	out.Reset()
	if err := devstack.CatchUp(t.Context(), &out, e.store, e.reg, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "replayed") {
		t.Errorf("a second start replayed again:\n%s", out.String())
	}
}

// TestCatchUpKeepUnhandled: with the replay turned off, the events stay
// and the one command that replays them is printed.
func TestCatchUpKeepUnhandled(t *testing.T) {
	t.Parallel()
	e := setupCatchUp(t)
	var out bytes.Buffer
	if err := devstack.CatchUp(t.Context(), &out, e.store, e.reg, false); err != nil {
		t.Fatal(err)
	}
	want := "unhandled: 2 events came before their handler; to run it on them: go run ./cmd/webhookctl replay --outcome unhandled --source stripe --type invoice.paid --yes"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant a line with:\n%s", out.String(), want)
	}
	for _, ev := range e.before {
		if done, outcome := e.processed(t, ev); !done || outcome != string(inbox.OutcomeUnhandled) {
			t.Errorf("event %d replayed although asked not to: processed=%v outcome=%q", ev.ID, done, outcome)
		}
	}
}
