// Package squareorders is an example processor handler, and a pattern to
// copy: it mirrors Square orders into a square_orders table from
// order.created and order.updated events, where an older version never
// overwrites a newer one, because Square delivers webhooks out of order.
//
// What to copy (see also shared/handlers/stripedunning):
//
//   - Register registers the handlers for a processor.Match the
//     application chooses; Schema declares the package's own tables (their
//     migrations, with their own goose version table) and what the
//     processor's role may do with them.
//   - The handler decodes the event, calls an event it can never apply
//     processor.Permanent, and writes in the transaction it is given.
//   - Out-of-order deliveries: the write is an upsert guarded by the
//     sender's own version number (ON CONFLICT ... DO UPDATE ... WHERE
//     stored.version < new.version). Deliveries may arrive in any order,
//     be applied by concurrent processors, or be redelivered: the row ends
//     with the newest version. The row lock the upsert takes serialises
//     concurrent writers of one order, and the guard is evaluated on the
//     row's newest committed version.
//
// The events carry the order's summary only (id, location, state, version,
// times). An application that needs line items would fetch the order from
// Square's API outside the transaction and keep the same version guard.
package squareorders

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/handlers/squareorders/internal/dbsqlc"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Event types this package handles.
const (
	TypeOrderCreated = "order.created"
	TypeOrderUpdated = "order.updated"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable is the goose version table of this package's migrations.
const VersionTable = "squareorders_goose_db_version"

// Schema is the package's tables (square_orders), created by the
// migration function. The handler upserts and reads orders, never deletes
// one: the processor's role gets exactly that.
var Schema = processor.HandlerSchema{
	Name: "squareorders", Migrations: migrations, Dir: "migrations", VersionTable: VersionTable,
	Grants: map[string][]string{"square_orders": {"SELECT", "INSERT", "UPDATE"}},
}

// Register registers the order handlers for the events of m, usually
// processor.Kind("square").
func Register(r *processor.Registry, m processor.Match) {
	r.HandleFunc(m, TypeOrderCreated, handleOrder)
	r.HandleFunc(m, TypeOrderUpdated, handleOrder)
}

// squareEvent is the part of a Square order event the handler reads. The
// order's summary is in data.object.order_created for order.created and in
// data.object.order_updated for order.updated.
type squareEvent struct {
	MerchantID string `json:"merchant_id"`
	Type       string `json:"type"`
	EventID    string `json:"event_id"`
	Data       struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Object struct {
			OrderCreated *orderSummary `json:"order_created"`
			OrderUpdated *orderSummary `json:"order_updated"`
		} `json:"object"`
	} `json:"data"`
}

type orderSummary struct {
	OrderID    string     `json:"order_id"`
	LocationID string     `json:"location_id"`
	State      string     `json:"state"`
	Version    int        `json:"version"`
	CreatedAt  *time.Time `json:"created_at"`
	UpdatedAt  *time.Time `json:"updated_at"`
}

func handleOrder(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	var se squareEvent
	if err := ev.Decode(&se); err != nil {
		return processor.Permanent(err)
	}
	o := se.Data.Object.OrderCreated
	if ev.Type == TypeOrderUpdated {
		o = se.Data.Object.OrderUpdated
	}
	switch {
	case o == nil:
		return processor.Permanent(fmt.Errorf("event %s (%s): no order summary in data.object", ev.EventID, ev.Type))
	case o.OrderID == "" || o.LocationID == "" || o.State == "":
		return processor.Permanent(fmt.Errorf("event %s: the order summary lacks order_id, location_id or state", ev.EventID))
	case o.Version < 1:
		return processor.Permanent(fmt.Errorf("event %s: order %s has no version", ev.EventID, o.OrderID))
	}
	err := queries.SquareOrderUpsert(ctx, tx, dbsqlc.SquareOrderUpsertParams{
		Source: ev.Source, OrderID: o.OrderID, MerchantID: nullIfEmpty(se.MerchantID), LocationID: o.LocationID,
		State: o.State, Version: int32(o.Version), OrderCreatedAt: o.CreatedAt, OrderUpdatedAt: o.UpdatedAt, EventID: ev.EventID,
	})
	if err != nil {
		return fmt.Errorf("upsert order %s version %d: %w", o.OrderID, o.Version, err)
	}
	return nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Order is the mirrored state of one Square order.
type Order struct {
	Source         string
	OrderID        string
	MerchantID     *string
	LocationID     string
	State          string
	Version        int
	OrderCreatedAt *time.Time
	OrderUpdatedAt *time.Time
	LastEventID    string
}

// queries is the package's generated code (queries/square_orders.sql).
var queries = dbsqlc.New()

// Get returns the mirrored order, or pgx.ErrNoRows (wrapped) when none.
func Get(ctx context.Context, db storage.DBTX, source, orderID string) (Order, error) {
	r, err := queries.SquareOrderGet(ctx, db, dbsqlc.SquareOrderGetParams{Source: source, OrderID: orderID})
	if err != nil {
		return Order{}, fmt.Errorf("get order %s: %w", orderID, err)
	}
	return Order{
		Source: r.Source, OrderID: r.OrderID, MerchantID: r.MerchantID, LocationID: r.LocationID, State: r.State,
		Version: int(r.Version), OrderCreatedAt: r.OrderCreatedAt, OrderUpdatedAt: r.OrderUpdatedAt, LastEventID: r.LastEventID,
	}, nil
}
