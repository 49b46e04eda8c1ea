// Package handlers is where the application's business logic is wired
// into the processor: Register lists every handler, Tables their own
// tables. The processor Lambda and `make dev` both call Register, so the
// local drain runs exactly the deployed handlers; the migration function
// (shared/dbschema) creates the tables and grants the processor's database
// role what Tables says, and `make dev` applies the same migrations. The
// packages below it (stripedunning, squareorders) are examples to copy.
package handlers

import (
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

// Tables are the handler packages' own tables, each with its migrations
// (applied with their own goose version table) and the privileges the
// processor's role needs on them: a handler package with tables adds its
// Tables here. The processor never applies them; the migration function
// does, at each deploy.
var Tables = []processor.Tables{
	stripedunning.Tables,
	squareorders.Tables,
}
