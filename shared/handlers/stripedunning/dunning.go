// Package stripedunning is an example processor handler, and the pattern
// to copy for your own: it keeps a dunning state per Stripe customer and
// invoice from invoice.payment_failed and invoice.paid events.
//
// What to copy:
//
//   - Register: one function that registers the package's handlers for a
//     processor.Match the application chooses (a source kind or name).
//   - Schema: the package's business tables live in its own embedded goose
//     migrations, applied by the migration function with their own version
//     table, never in the core schema; Schema also says what the
//     processor's database role may do with them, and that is all it may.
//   - The handlers decode the event (a payload that cannot be decoded, or
//     is not the object expected, is processor.Permanent: retrying cannot
//     fix it) and make every change in the transaction they are given,
//     which the processor commits together with the event's processed_at.
//   - Out-of-order deliveries: Stripe does not deliver in order, and a
//     retried event can arrive after a newer one. Each write here is a
//     merge whose result does not depend on the order (a paid invoice
//     stays paid; the highest attempt count wins), so no ordering is needed.
//
// Semantics: invoice.payment_failed opens (or advances) the invoice's
// dunning, status past_due, with Stripe's attempt count and next retry;
// invoice.paid clears it. A paid invoice is final in Stripe, so a
// payment_failed that arrives after the paid event is recorded but never
// reopens it; that is also why invoice.paid writes a cleared row even for
// an invoice that never failed (a later-arriving failure must find it).
// Other ways out of dunning (invoice.voided, invoice.marked_uncollectible)
// would be handled like invoice.paid.
package stripedunning

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/handlers/stripedunning/internal/dbsqlc"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Event types this package handles.
const (
	TypePaymentFailed = "invoice.payment_failed"
	TypePaid          = "invoice.paid"
)

// Statuses of a dunning row.
const (
	StatusPastDue = "past_due"
	StatusCleared = "cleared"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable is the goose version table of this package's migrations.
const VersionTable = "stripedunning_goose_db_version"

// Schema is the package's tables (stripe_dunning), created by the
// migration function. The handlers upsert and read dunning rows, never
// delete one: the processor's role gets exactly that.
var Schema = processor.HandlerSchema{
	Name: "stripedunning", Migrations: migrations, Dir: "migrations", VersionTable: VersionTable,
	Grants: map[string][]string{"stripe_dunning": {"SELECT", "INSERT", "UPDATE"}},
}

// Register registers the dunning handlers for the events of m, usually
// processor.Kind("stripe").
func Register(r *processor.Registry, m processor.Match) {
	r.HandleFunc(m, TypePaymentFailed, handlePaymentFailed)
	r.HandleFunc(m, TypePaid, handlePaid)
}

// stripeEvent is the part of a Stripe event the handlers read.
type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object invoice `json:"object"`
	} `json:"data"`
}

// invoice is the part of a Stripe invoice the handlers read.
type invoice struct {
	ID                 string `json:"id"`
	Object             string `json:"object"`
	Customer           string `json:"customer"`
	AmountDue          int64  `json:"amount_due"`
	Currency           string `json:"currency"`
	AttemptCount       int    `json:"attempt_count"`
	NextPaymentAttempt *int64 `json:"next_payment_attempt"`
	HostedInvoiceURL   string `json:"hosted_invoice_url"`
}

// decode reads an invoice event, refusing for good one that is not one.
func decode(ev *processor.Event) (stripeEvent, error) {
	var se stripeEvent
	if err := ev.Decode(&se); err != nil {
		return se, processor.Permanent(err)
	}
	inv := se.Data.Object
	switch {
	case inv.Object != "invoice":
		return se, processor.Permanent(fmt.Errorf("event %s: data.object is %q, not an invoice", ev.EventID, inv.Object))
	case inv.ID == "" || inv.Customer == "":
		return se, processor.Permanent(fmt.Errorf("event %s: the invoice has no id or no customer", ev.EventID))
	case se.Created <= 0:
		return se, processor.Permanent(errors.New("event " + ev.EventID + ": no created time"))
	}
	return se, nil
}

func handlePaymentFailed(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	se, err := decode(ev)
	if err != nil {
		return err
	}
	inv := se.Data.Object
	var next *time.Time
	if inv.NextPaymentAttempt != nil {
		t := time.Unix(*inv.NextPaymentAttempt, 0)
		next = &t
	}
	err = queries.StripeDunningRecordFailure(ctx, tx, dbsqlc.StripeDunningRecordFailureParams{
		Source: ev.Source, InvoiceID: inv.ID, CustomerID: inv.Customer, FailedAttempts: int32(inv.AttemptCount),
		AmountDue: inv.AmountDue, Currency: inv.Currency, NextPaymentAttempt: next,
		HostedInvoiceURL: nullIfEmpty(inv.HostedInvoiceURL), FailedAt: time.Unix(se.Created, 0), EventID: ev.EventID,
	})
	if err != nil {
		return fmt.Errorf("record payment failure of invoice %s: %w", inv.ID, err)
	}
	return nil
}

func handlePaid(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	se, err := decode(ev)
	if err != nil {
		return err
	}
	inv := se.Data.Object
	err = queries.StripeDunningClear(ctx, tx, dbsqlc.StripeDunningClearParams{
		Source: ev.Source, InvoiceID: inv.ID, CustomerID: inv.Customer, AmountDue: inv.AmountDue, Currency: inv.Currency,
		ClearedAt: time.Unix(se.Created, 0), EventID: ev.EventID,
	})
	if err != nil {
		return fmt.Errorf("clear dunning of invoice %s: %w", inv.ID, err)
	}
	return nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Dunning is the dunning state of one invoice.
type Dunning struct {
	Source             string
	InvoiceID          string
	CustomerID         string
	Status             string
	FailedAttempts     int
	AmountDue          *int64
	Currency           *string
	NextPaymentAttempt *time.Time
	FirstFailedAt      *time.Time
	LastFailedAt       *time.Time
	ClearedAt          *time.Time
	LastEventID        string
}

// queries is the package's generated code (queries/stripe_dunning.sql).
var queries = dbsqlc.New()

func dunningFromRow(r dbsqlc.StripeDunning) Dunning {
	return Dunning{
		Source: r.Source, InvoiceID: r.InvoiceID, CustomerID: r.CustomerID, Status: r.Status, FailedAttempts: int(r.FailedAttempts),
		AmountDue: r.AmountDue, Currency: r.Currency, NextPaymentAttempt: r.NextPaymentAttempt,
		FirstFailedAt: r.FirstFailedAt, LastFailedAt: r.LastFailedAt, ClearedAt: r.ClearedAt, LastEventID: r.LastEventID,
	}
}

// Get returns the dunning state of an invoice, or pgx.ErrNoRows (wrapped)
// when none was recorded.
func Get(ctx context.Context, db storage.DBTX, source, invoiceID string) (Dunning, error) {
	r, err := queries.StripeDunningGet(ctx, db, dbsqlc.StripeDunningGetParams{Source: source, InvoiceID: invoiceID})
	if err != nil {
		return Dunning{}, fmt.Errorf("get dunning of invoice %s: %w", invoiceID, err)
	}
	return dunningFromRow(r), nil
}

// Open returns the invoices of a customer that are in dunning (past due).
func Open(ctx context.Context, db storage.DBTX, source, customerID string) ([]Dunning, error) {
	rows, err := queries.StripeDunningListOpen(ctx, db, dbsqlc.StripeDunningListOpenParams{Source: source, CustomerID: customerID})
	if err != nil {
		return nil, fmt.Errorf("open dunning of customer %s: %w", customerID, err)
	}
	out := make([]Dunning, len(rows))
	for i, r := range rows {
		out[i] = dunningFromRow(r)
	}
	return out, nil
}
