package processor

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Event is a stored event as a handler sees it: the domain's event row,
// with Attempts set to this attempt's number (from 1). Decode reads its
// JSON.
type Event = inbox.Event

// Handler applies one event. It makes every database change in tx, which
// the processor commits together with processed_at when Handle returns nil
// and rolls back otherwise; it must not commit or roll back tx itself
// (tx.Begin, a savepoint, is fine). Handle may run more than once for an
// event (each failed attempt is rolled back and retried), so any effect
// outside tx must be idempotent. ctx carries the handler's time limit.
//
// Return Permanent(err) for an event that can never succeed (a payload that
// does not decode, a reference that cannot exist): it goes to the dead
// letters at once instead of spending its retries. Any other error, or a
// panic, is retried with backoff.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, ev *Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, ev *Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx pgx.Tx, ev *Event) error { return f(ctx, tx, ev) }

// AnyType registers a handler for every event type of a source or kind that
// has no handler for its exact type.
const AnyType = "*"

// Match says which events a registration is for: those of one source name,
// or those of every source of one kind.
type Match struct {
	source, kind string
}

// Source matches the events of the source with this name (the provider
// column, the {source} of the URL).
func Source(name string) Match { return Match{source: name} }

// Kind matches the events of every source of this kind ("stripe", ...).
func Kind(kind string) Match { return Match{kind: kind} }

// String returns "source NAME" or "kind KIND".
func (m Match) String() string {
	if m.source != "" {
		return "source " + m.source
	}
	return "kind " + m.kind
}

type routeKey struct {
	match     Match
	eventType string
}

// Registry routes events to handlers. Register at start-up; lookups are
// safe for concurrent use with each other and with registrations.
//
// An event goes to the first handler found, from the most to the least
// specific:
//
//  1. its source name and its type;
//  2. its source name and AnyType;
//  3. its source's kind and its type;
//  4. its source's kind and AnyType;
//  5. the fallback.
//
// An event that matches nothing is "unhandled" and follows the processor's
// UnhandledPolicy.
type Registry struct {
	mu       sync.RWMutex
	routes   map[routeKey]Handler
	fallback Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{routes: map[routeKey]Handler{}} }

// Handle registers h for the events of m with this type (or AnyType). Like
// http.ServeMux, it panics on a programming error found at start-up: an
// empty match or type, a nil handler, or a second handler for the same
// route (two handlers for one event would make it unclear which one ran).
func (r *Registry) Handle(m Match, eventType string, h Handler) {
	switch {
	case m.source == "" && m.kind == "":
		panic("processor: Handle: empty match: use processor.Source(name) or processor.Kind(kind)")
	case eventType == "":
		panic(fmt.Sprintf("processor: Handle(%s): empty event type: use processor.AnyType for every type", m))
	case h == nil:
		panic(fmt.Sprintf("processor: Handle(%s, %q): nil handler", m, eventType))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := routeKey{m, eventType}
	if _, dup := r.routes[k]; dup {
		panic(fmt.Sprintf("processor: Handle(%s, %q): a handler is already registered", m, eventType))
	}
	r.routes[k] = h
}

// HandleFunc registers f for the events of m with this type.
func (r *Registry) HandleFunc(m Match, eventType string, f func(ctx context.Context, tx pgx.Tx, ev *Event) error) {
	r.Handle(m, eventType, HandlerFunc(f))
}

// Fallback registers h for the events no other route matches. It panics if
// a fallback is already set or h is nil.
func (r *Registry) Fallback(h Handler) {
	if h == nil {
		panic("processor: Fallback: nil handler")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fallback != nil {
		panic("processor: Fallback: a fallback is already registered")
	}
	r.fallback = h
}

// Lookup returns the handler for an event of this source, kind and type.
func (r *Registry) Lookup(source, kind, eventType string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	keys := [...]routeKey{
		{Source(source), eventType},
		{Source(source), AnyType},
		{Kind(kind), eventType},
		{Kind(kind), AnyType},
	}
	for i, k := range keys {
		if (i >= 2 && kind == "") || (i < 2 && source == "") {
			continue
		}
		if h, ok := r.routes[k]; ok {
			return h, true
		}
	}
	if r.fallback != nil {
		return r.fallback, true
	}
	return nil, false
}
