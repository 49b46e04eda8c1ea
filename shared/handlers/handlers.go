// Package handlers is where the application's business logic is wired
// into the processor: Register lists every handler, Migrate creates and
// upgrades their tables. The processor Lambda and `make dev` both call
// them, so the local drain runs exactly the deployed handlers. The
// packages below it (stripedunning, squareorders) are examples to copy.
package handlers

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/shared/handlers/squareorders"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/stripedunning"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// Register wires the handlers: one line per handler, by source kind (every
// source of that kind) or by source name (one configured source), and
// event type or processor.AnyType. Events that match nothing follow
// PROCESSOR_UNHANDLED (by default: marked processed with outcome
// "unhandled"). See docs/processor.md.
//
// The two examples below are the pattern to copy; remove them when you
// register your own.
func Register(r *processor.Registry) {
	stripedunning.Register(r, processor.Kind(source.KindStripe))
	squareorders.Register(r, processor.Kind(source.KindSquare))

	// Your handlers, for example:
	//
	//	r.HandleFunc(processor.Source("billing"), "invoice.created",
	//		func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	//			var body struct{ Data struct{ Customer string } }
	//			if err := ev.Decode(&body); err != nil {
	//				return processor.Permanent(err)
	//			}
	//			_, err := tx.Exec(ctx, `UPDATE accounts SET invoiced = true WHERE customer = $1`, body.Data.Customer)
	//			return err
	//		})
}

// migrations create and upgrade the tables of the registered handlers,
// each package with its own goose version table; a handler with its own
// tables adds its Migrate here.
var migrations = []func(context.Context, *pgxpool.Pool) (int64, error){
	stripedunning.Migrate,
	squareorders.Migrate,
}

// Migrate applies every handler package's migrations (a no-op once
// applied).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	for _, m := range migrations {
		if _, err := m(ctx, pool); err != nil {
			return err
		}
	}
	return nil
}
