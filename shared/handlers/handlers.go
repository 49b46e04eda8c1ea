// Package handlers is where the application's business logic is wired
// into the processor: Register lists every handler, Schemas their own
// tables. The processor Lambda and `make dev` both call Register, so the
// local drain runs exactly the deployed handlers; the migration function
// (shared/dbschema) creates the tables and grants the processor's database
// role what Schemas says, and `make dev` applies the same migrations. The
// packages below it (stripedunning, squareorders) are examples to copy.
//
// The lines themselves live in local.go, the application's file, which
// upstream never edits (docs/fork.md): `webhookdev new handler NAME`
// writes a handler package and adds its two lines there.
package handlers

import (
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// Register wires the handlers: local.go's register, one line per handler
// package, by source kind (every source of that kind) or by source name
// (one configured source), and event type or processor.AnyType. Events
// that match nothing follow PROCESSOR_UNHANDLED (by default: marked
// processed with outcome "unhandled"). See docs/processor.md.
//
// A handler package's Register is the pattern (stripedunning's); a single
// handler can also be registered inline in local.go, for example:
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
func Register(r *processor.Registry) {
	register(r)
}

// Schemas are the handler packages' own tables (local.go's schemas), each
// with its migrations (applied with their own goose version table) and
// the privileges the processor's role needs on them: a handler package
// with tables adds its Schema there. The processor never applies them;
// the migration function does, at each deploy.
var Schemas = schemas
