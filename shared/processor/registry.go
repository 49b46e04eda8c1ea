package processor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
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

// SourceName returns the source name of a Source match, else "".
func (m Match) SourceName() string { return m.source }

// KindName returns the kind of a Kind match, else "".
func (m Match) KindName() string { return m.kind }

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

// route is one registration: its handler and where it was made.
type route struct {
	h    Handler
	site string
}

// Registry routes events to handlers. Register at start-up, then check
// Err before serving: a registration that cannot be honoured (a second
// handler for one route, an empty match or type, a nil handler) is
// recorded there rather than panicking, so that start-up fails with one
// line naming both registrations instead of a stack trace. Lookups are
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
	routes   map[routeKey]route
	fallback route
	errs     []error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{routes: map[routeKey]route{}} }

// Handle registers h for the events of m with this type (or AnyType). A
// programming error (an empty match or type, a nil handler, or a second
// handler for the same route: two handlers for one event would make it
// unclear which one ran) is recorded for Err, which processor.New checks;
// the route keeps its first handler.
func (r *Registry) Handle(m Match, eventType string, h Handler) {
	r.handle(m, eventType, h, callerSite(2))
}

// HandleFunc registers f for the events of m with this type.
func (r *Registry) HandleFunc(m Match, eventType string, f func(ctx context.Context, tx pgx.Tx, ev *Event) error) {
	var h Handler
	if f != nil { // a nil func is a nil handler, not a HandlerFunc that panics
		h = HandlerFunc(f)
	}
	r.handle(m, eventType, h, callerSite(2))
}

func (r *Registry) handle(m Match, eventType string, h Handler, site string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case m.source == "" && m.kind == "":
		r.errs = append(r.errs, fmt.Errorf("processor: route with an empty match (by %s): use processor.Source(name) or processor.Kind(kind)", site))
		return
	case eventType == "":
		r.errs = append(r.errs, fmt.Errorf("processor: route %s with an empty event type (by %s): use processor.AnyType for every type", m, site))
		return
	case h == nil:
		r.errs = append(r.errs, fmt.Errorf("processor: route %s, %s with a nil handler (by %s)", m, typeString(eventType), site))
		return
	}
	k := routeKey{m, eventType}
	if first, dup := r.routes[k]; dup {
		r.errs = append(r.errs, fmt.Errorf("processor: route %s, %s registered twice: by %s and by %s", m, typeString(eventType), first.site, site))
		return
	}
	r.routes[k] = route{h, site}
}

// Fallback registers h for the events no other route matches. A second
// fallback or a nil h is recorded for Err, like Handle's errors.
func (r *Registry) Fallback(h Handler) {
	site := callerSite(2)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case h == nil:
		r.errs = append(r.errs, fmt.Errorf("processor: fallback with a nil handler (by %s)", site))
	case r.fallback.h != nil:
		r.errs = append(r.errs, fmt.Errorf("processor: fallback registered twice: by %s and by %s", r.fallback.site, site))
	default:
		r.fallback = route{h, site}
	}
}

// Err returns the registrations that could not be honoured, one line each
// (joined), or nil. Every program that serves a registry fails its
// start-up on it: processor.New does.
func (r *Registry) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return errors.Join(r.errs...)
}

// Lookup returns the handler for an event of this source, kind and type.
func (r *Registry) Lookup(source, kind, eventType string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, rt, ok := r.find(source, kind, eventType)
	return rt.h, ok
}

// Resolve is Lookup's answer as a Route: which registration an event of
// this source, kind and type goes to (webhookctl handlers prints it).
// With AnyType as the type, it answers for the types no exact route names.
func (r *Registry) Resolve(source, kind, eventType string) (Route, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, rt, ok := r.find(source, kind, eventType)
	if !ok {
		return Route{}, false
	}
	return Route{Match: k.match, Type: k.eventType, Site: rt.site}, true
}

// find is Lookup under r.mu; the fallback's key is the zero routeKey.
func (r *Registry) find(source, kind, eventType string) (routeKey, route, bool) {
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
		if rt, ok := r.routes[k]; ok {
			return k, rt, true
		}
	}
	if r.fallback.h != nil {
		return routeKey{}, r.fallback, true
	}
	return routeKey{}, route{}, false
}

// Route is one registration, as Routes lists it.
type Route struct {
	// Match is the source or kind, Type the event type (or AnyType); both
	// empty for the fallback.
	Match Match
	Type  string
	// Site is where it was registered: the calling function and its
	// file:line, "shared/handlers/stripedunning.Register (dunning.go:75)".
	Site string
}

// Fallback reports whether this is the fallback route.
func (rt Route) Fallback() bool { return rt.Match == Match{} }

// String returns "source NAME, type TYPE", "kind KIND, any type" or
// "fallback".
func (rt Route) String() string {
	if rt.Fallback() {
		return "fallback"
	}
	return rt.Match.String() + ", " + typeString(rt.Type)
}

// Routes returns every registration in routing precedence: the source
// routes (by name), then the kind routes (by kind), each one's exact types
// (sorted) before its AnyType, then the fallback. For one event, the first
// route that matches it is the one Lookup picks.
func (r *Registry) Routes() []Route {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Route, 0, len(r.routes)+1)
	for k, rt := range r.routes {
		out = append(out, Route{Match: k.match, Type: k.eventType, Site: rt.site})
	}
	slices.SortFunc(out, compareRoutes)
	if r.fallback.h != nil {
		out = append(out, Route{Site: r.fallback.site})
	}
	return out
}

func compareRoutes(a, b Route) int {
	rank := func(rt Route) int { // sources before kinds
		if rt.Match.source != "" {
			return 0
		}
		return 1
	}
	return cmp.Or(
		cmp.Compare(rank(a), rank(b)),
		cmp.Compare(a.Match.source+a.Match.kind, b.Match.source+b.Match.kind),
		cmp.Compare(boolInt(a.Type == AnyType), boolInt(b.Type == AnyType)),
		cmp.Compare(a.Type, b.Type),
	)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Shadow is a kind route that the events of one source never reach,
// because a route by that source's name takes them first.
type Shadow struct {
	// Source is the configured source, of kind Kind.Match's kind.
	Source string
	// By is the source route that takes the events; Kind the kind route it
	// shadows, for Kind.Type (or, for an AnyType kind route, for By.Type).
	By, Kind Route
}

// String is the line start-up logs: which source route shadows which kind
// route, and where each was registered.
func (s Shadow) String() string {
	return fmt.Sprintf("route %s (by %s) shadows route %s (by %s) for the events of source %s",
		s.By, s.By.Site, s.Kind, s.Kind.Site, s.Source)
}

// Shadows returns, for the sources whose kinds are given (source name to
// kind, as the sources document says), every kind route that a route by
// the source's name overrides for that source's events: an intended
// override or a mistake, which only the author can tell, so start-up
// says so. They are ordered by source, then as Routes orders the kind
// routes. Without the sources document, a source's kind is unknown and
// nothing can be said.
func (r *Registry) Shadows(sourceKinds map[string]string) []Shadow {
	routes := r.Routes()
	byKey := make(map[routeKey]Route, len(routes))
	for _, rt := range routes {
		byKey[routeKey{rt.Match, rt.Type}] = rt
	}
	var out []Shadow
	for _, name := range slices.Sorted(maps.Keys(sourceKinds)) {
		kind := sourceKinds[name]
		if kind == "" {
			continue
		}
		for _, kr := range routes {
			if kr.Match != Kind(kind) {
				continue
			}
			if kr.Type != AnyType {
				// Lookup's order: the source's exact type, then its AnyType.
				if by, ok := byKey[routeKey{Source(name), kr.Type}]; ok {
					out = append(out, Shadow{name, by, kr})
				} else if by, ok := byKey[routeKey{Source(name), AnyType}]; ok {
					out = append(out, Shadow{name, by, kr})
				}
				continue
			}
			// The kind's AnyType loses, for this source, every type its
			// own routes take that no exact kind route took already.
			for _, by := range routes {
				if by.Match != Source(name) {
					continue
				}
				if _, exact := byKey[routeKey{Kind(kind), by.Type}]; exact && by.Type != AnyType {
					continue
				}
				out = append(out, Shadow{name, by, kr})
			}
		}
	}
	return out
}

// typeString names an event type in a message: AnyType reads "any type".
func typeString(eventType string) string {
	if eventType == AnyType {
		return "any type"
	}
	return "type " + eventType
}

// modulePrefix is this module's import path with its trailing slash
// ("github.com/webhook-inbox/webhook-inbox/"), trimmed from the function
// names of registration sites: a fork that renames the module still reads
// "shared/handlers/...".
var modulePrefix = strings.TrimSuffix(reflect.TypeFor[Registry]().PkgPath(), "shared/processor")

// callerSite names the function skip frames up and its file:line, as
// "shared/handlers/stripedunning.Register (dunning.go:75)".
func callerSite(skip int) string {
	pc, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "an unknown caller"
	}
	fn := "an unknown function"
	if f := runtime.FuncForPC(pc); f != nil {
		fn = strings.TrimPrefix(f.Name(), modulePrefix)
	}
	return fmt.Sprintf("%s (%s:%d)", fn, filepath.Base(file), line)
}
