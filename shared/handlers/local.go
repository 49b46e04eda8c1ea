package handlers

// This file is the application's: its handler registrations and their
// tables. Upstream ships it once and never edits it again, so a fork that
// takes new releases (docs/fork.md) meets no conflict here, and
// `webhookdev new handler` adds its two lines at the markers below
// without touching the others. Keep the markers; everything else is yours.
//
// The two examples are registered so that `make dev` does something with
// the sample events from the start: remove their lines (and imports) when
// you register your own, above all one of yours that serves the same
// (kind, type), which would clash with theirs.

import (
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/squareorders"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/stripedunning"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

// register wires the application's handlers: one line per handler
// package, by source kind (every source of that kind) or by source name
// (one configured source). See Register.
func register(r *processor.Registry) {
	stripedunning.Register(r, processor.Kind("stripe"))
	squareorders.Register(r, processor.Kind("square"))
	// webhookdev new handler: registrations above this line.
}

// schemas are the application's handler packages' tables, one line per
// package with tables. See Schemas.
var schemas = []processor.HandlerSchema{
	stripedunning.Schema,
	squareorders.Schema,
	// webhookdev new handler: schemas above this line.
}
