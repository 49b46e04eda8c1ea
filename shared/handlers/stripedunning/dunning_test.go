package stripedunning_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/stripedunning"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// TestMain gives the tests databases with the package's tables, whether or
// not shared/handlers registers it.
func TestMain(m *testing.M) { pgtest.Main(m, stripedunning.Schema) }

const (
	invoiceID  = "in_1PzInvA1b2C3d4E5"
	customerID = "cus_QabCdEfGhIjKlM"
)

type fixture struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *storage.Store
	proc  *processor.Processor
}

// setup takes a fresh database (pgtest applies the deployed schema, this
// package's table included) and builds a processor routing stripe-kind
// sources to the dunning handlers, as functions/processor does, connected
// as the processor's role: a statement its grants do not allow fails here.
// The test seeds and reads as the owner.
func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	reg := processor.NewRegistry()
	stripedunning.Register(reg, processor.Kind("stripe"))
	now := time.Now().Add(time.Minute) // past every event's insert time
	p, err := processor.New(processor.Config{SourceKinds: map[string]string{"stripe": "stripe", "stripe-eu": "stripe"}},
		processor.Deps{Pool: pgtest.As(t, pool, migrate.RoleProcessor), Registry: reg, Clock: testclock.At(now)})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, pool: pool, store: storage.New(pool), proc: p}
}

// event returns a testdata event with its id replaced and edit applied to
// the event and its invoice (decoded as maps).
func event(t *testing.T, file, id string, edit func(ev, inv map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["id"] = id
	if edit != nil {
		edit(ev, ev["data"].(map[string]any)["object"].(map[string]any))
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failure is invoice.payment_failed for attempt n, created an hour later
// per attempt, with Stripe's next retry a day after it.
func failure(t *testing.T, id string, n int) []byte {
	return event(t, "invoice_payment_failed.json", id, func(ev, inv map[string]any) {
		created := 1717430400 + int64(n-1)*3600
		ev["created"] = created
		inv["attempt_count"] = n
		inv["amount_due"] = 4900 + n // tells which failure the row shows
		inv["next_payment_attempt"] = created + 86400
	})
}

// deliver stores a body as the receiver would, then drains.
func (f *fixture) deliver(source string, bodies ...[]byte) processor.Stats {
	f.t.Helper()
	for _, b := range bodies {
		var id struct{ ID, Type string }
		if err := json.Unmarshal(b, &id); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: source, EventID: id.ID, EventType: id.Type, Body: b}); err != nil {
			f.t.Fatal(err)
		}
	}
	st, err := f.proc.Drain(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) get(source string) stripedunning.Dunning {
	f.t.Helper()
	d, err := stripedunning.Get(f.ctx, f.pool, source, invoiceID)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func TestPaymentFailedOpensAndAdvancesDunning(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if st := f.deliver("stripe", event(t, "invoice_payment_failed.json", "evt_f1", nil)); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	d := f.get("stripe")
	if !field.Check(t, "after the first failure",
		field.Eq("Status", d.Status, stripedunning.StatusPastDue),
		field.Eq("CustomerID", d.CustomerID, customerID),
		field.Eq("FailedAttempts", d.FailedAttempts, 1),
		field.Eq("AmountDue", *d.AmountDue, 4900),
		field.Eq("Currency", *d.Currency, "usd"),
		field.Is("NextPaymentAttempt", d.NextPaymentAttempt, d.NextPaymentAttempt.Equal(time.Unix(1717689600, 0)), "the invoice's next_payment_attempt"),
		field.Is("FirstFailedAt", d.FirstFailedAt, d.FirstFailedAt.Equal(time.Unix(1717430400, 0)), "the first failure's time"),
		field.Eq("LastEventID", d.LastEventID, "evt_f1"),
		field.Eq("ClearedAt", d.ClearedAt, nil),
	) {
		t.FailNow()
	}
	f.deliver("stripe", failure(t, "evt_f2", 2))
	d = f.get("stripe")
	if !field.Check(t, "after the second failure",
		field.Eq("FailedAttempts", d.FailedAttempts, 2),
		field.Eq("AmountDue", *d.AmountDue, 4902),
		field.Eq("LastEventID", d.LastEventID, "evt_f2"),
		field.Is("FirstFailedAt", d.FirstFailedAt, d.FirstFailedAt.Equal(time.Unix(1717430400, 0)), "the first failure's time"),
		field.Is("LastFailedAt", d.LastFailedAt, d.LastFailedAt.Equal(time.Unix(1717430400+3600, 0)), "the second failure's time"),
	) {
		t.FailNow()
	}
	open, err := stripedunning.Open(f.ctx, f.pool, "stripe", customerID)
	if err != nil || len(open) != 1 || open[0].InvoiceID != invoiceID {
		t.Fatalf("open = %+v, %v", open, err)
	}
}

func TestPaidClearsDunning(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.deliver("stripe", failure(t, "evt_f1", 1), failure(t, "evt_f2", 2))
	if st := f.deliver("stripe", event(t, "invoice_paid.json", "evt_paid", nil)); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	d := f.get("stripe")
	if d.Status != stripedunning.StatusCleared || !d.ClearedAt.Equal(time.Unix(1717862400, 0)) || d.FailedAttempts != 2 {
		t.Fatalf("after paid: %+v", d)
	}
	if open, _ := stripedunning.Open(f.ctx, f.pool, "stripe", customerID); len(open) != 0 {
		t.Fatalf("still open: %+v", open)
	}
}

// TestOutOfOrderDeliveries: the final state does not depend on the order
// the events arrive in.
func TestOutOfOrderDeliveries(t *testing.T) {
	t.Parallel()
	t.Run("a late failure never reopens a paid invoice", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.deliver("stripe", event(t, "invoice_paid.json", "evt_paid", nil))
		if d := f.get("stripe"); d.Status != stripedunning.StatusCleared || d.FailedAttempts != 0 {
			t.Fatalf("paid first: %+v", d)
		}
		f.deliver("stripe", failure(t, "evt_f2", 2))
		d := f.get("stripe")
		if d.Status != stripedunning.StatusCleared || d.FailedAttempts != 2 || !d.ClearedAt.Equal(time.Unix(1717862400, 0)) {
			t.Fatalf("after the late failure: %+v", d)
		}
	})
	t.Run("failures keep the highest attempt", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.deliver("stripe", failure(t, "evt_f3", 3))
		f.deliver("stripe", failure(t, "evt_f1", 1), failure(t, "evt_f2", 2))
		d := f.get("stripe")
		if !field.Check(t, "after failures 3, 1, 2",
			field.Eq("FailedAttempts", d.FailedAttempts, 3),
			field.Eq("AmountDue", *d.AmountDue, 4903),
			field.Eq("LastEventID", d.LastEventID, "evt_f3"),
			field.Is("NextPaymentAttempt", d.NextPaymentAttempt, d.NextPaymentAttempt.Equal(time.Unix(1717430400+2*3600+86400, 0)), "the latest failure's next_payment_attempt"),
			field.Is("FirstFailedAt", d.FirstFailedAt, d.FirstFailedAt.Equal(time.Unix(1717430400, 0)), "the earliest failure's time"),
			field.Is("LastFailedAt", d.LastFailedAt, d.LastFailedAt.Equal(time.Unix(1717430400+2*3600, 0)), "the latest failure's time"),
		) {
			t.FailNow()
		}
	})
}

func TestSourcesAreSeparate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Two Stripe accounts, two sources of kind stripe: the same ids do not
	// mix (invoice ids are only unique per account).
	f.deliver("stripe", failure(t, "evt_f1", 1))
	f.deliver("stripe-eu", failure(t, "evt_f1", 1), event(t, "invoice_paid.json", "evt_paid", nil))
	if d := f.get("stripe"); d.Status != stripedunning.StatusPastDue {
		t.Fatalf("stripe: %+v", d)
	}
	if d := f.get("stripe-eu"); d.Status != stripedunning.StatusCleared {
		t.Fatalf("stripe-eu: %+v", d)
	}
}

// TestNotAnInvoiceIsDeadLettered: an event the handler can never apply is
// a permanent error: dead-lettered at once, not retried.
func TestNotAnInvoiceIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := event(t, "invoice_payment_failed.json", "evt_charge", func(_, inv map[string]any) { inv["object"] = "charge" })
	st := f.deliver("stripe", body, []byte(`{"id":"evt_garbage","type":"invoice.paid","data":[]}`))
	if st.DeadLettered != 2 || st.Retried != 0 {
		t.Fatalf("stats = %+v", st)
	}
	dls, err := f.store.DeadLetterList(f.ctx, storage.DeadLetterFilter{Source: "stripe"}, 10)
	if err != nil || len(dls) != 2 {
		t.Fatalf("dead letters = %+v, %v", dls, err)
	}
	if _, err := stripedunning.Get(f.ctx, f.pool, "stripe", invoiceID); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("a row was written: %v", err)
	}
}
