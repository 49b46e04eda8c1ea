// Package operations is what an operator of webhook-inbox can see and do,
// written once: the overview and stats, the events and one event in full
// (its body from Postgres or the archive), the dead letters, the refusals,
// the operator actions, and the actions that fix things (a requeue, a
// replay, a resolve, a discard, an expunge, an archive run), each counted
// before it runs.
//
// API is the one interface every front end calls: webhookctl's commands,
// the console's pages and the operator function's JSON API. Service
// implements it on the database and the archive (a front end with a
// network path to the database, and the operator function itself);
// internal/operatorclient implements it by calling the operator function
// through its IAM-authenticated URL. A front end only renders what comes
// back: windows, pages, counts and formats are decided here.
//
// Errors are *inbox.Error with a cause (invalid_argument, event_not_found,
// read_only, count_changed, database_unavailable...); the operator API
// maps each cause to its HTTP status in one table (shared/operatorapi).
package operations

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// API is everything an operator can read and do. Every method is a read
// of one consistent snapshot, or one action; none keeps state between
// calls but the cursors it returns.
type API interface {
	// Whoami says who the caller is, as actions are recorded, and
	// whether it may act.
	Whoami(ctx context.Context) (*Identity, error)
	// Stats is the state of the inbox at one instant: the backlog, the
	// open dead letters, refusals and mismatches over a window, the
	// archive's progress and, on request, charts over the window and the
	// tables' sizes and bloat.
	Stats(ctx context.Context, q StatsQuery) (*Stats, error)
	// Refusals are the refusals of a window, by source and cause, and the
	// latest records.
	Refusals(ctx context.Context, q RefusalsQuery) (*Refusals, error)
	// Events is a page of events, newest first.
	Events(ctx context.Context, q EventQuery) (*EventPage, error)
	// Find looks an event up by its id or by the sender's event id (in
	// one source, or in every one).
	Find(ctx context.Context, q FindQuery) (*EventPage, error)
	// Event is one event in full, but its body: its history, the actions
	// that touched it, its dead letters and the redeliveries that
	// differed.
	Event(ctx context.Context, ref EventRef) (*EventDetail, error)
	// EventBody is an event's raw body, from Postgres or the archive,
	// verified against the hash recorded at receipt.
	EventBody(ctx context.Context, id int64) (*Body, error)
	// DeadLetters is a page of the open dead letters, in the order they
	// died.
	DeadLetters(ctx context.Context, q DeadLetterQuery) (*DeadLetterPage, error)
	// Actions is a page of the operator actions, newest first.
	Actions(ctx context.Context, q ActionQuery) (*ActionPage, error)
	// Requeue sends open dead letters back to the processor, or counts
	// them (DryRun).
	Requeue(ctx context.Context, r RequeueRequest) (*RequeueResult, error)
	// Replay sends processed events through the processor again, or
	// counts them (DryRun); a large replay takes several calls.
	Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error)
	// Expunge erases one event's body everywhere, or says what it would
	// erase (DryRun).
	Expunge(ctx context.Context, r ExpungeRequest) (*ExpungeResult, error)
	// ArchiveRun archives what is due now, in a bounded number of
	// objects, or counts it (DryRun).
	ArchiveRun(ctx context.Context, r ArchiveRunRequest) (*ArchiveRunResult, error)
	// Pause holds a source's or a handler's events back from the
	// processor until Resume, or counts what it would hold (DryRun).
	Pause(ctx context.Context, r PauseRequest) (*PauseResult, error)
	// Resume lets a paused source's or handler's events run again, or
	// counts them (DryRun).
	Resume(ctx context.Context, r PauseRequest) (*PauseResult, error)
	// Resolve closes open dead letters without running their events
	// again, with a reason, or counts them (DryRun); a large resolve
	// takes several calls.
	Resolve(ctx context.Context, r ResolveRequest) (*ResolveResult, error)
	// Discard makes unprocessed events never run, with a reason, or
	// counts them (DryRun); a large discard takes several calls.
	Discard(ctx context.Context, r DiscardRequest) (*DiscardResult, error)
	// Quarantine is a page of the deliveries refused for their signature
	// or signed time and kept, newest first.
	Quarantine(ctx context.Context, q QuarantineQuery) (*QuarantinePage, error)
	// QuarantinedDelivery is one quarantined delivery, its kept headers
	// and body included.
	QuarantinedDelivery(ctx context.Context, id int64) (*QuarantinedDetail, error)
	// Reingest verifies quarantined deliveries again with the current
	// secrets and stores those that now verify, or counts them (DryRun).
	Reingest(ctx context.Context, r ReingestRequest) (*ReingestResult, error)
	// Purge deletes quarantined deliveries, or counts them (DryRun).
	Purge(ctx context.Context, r PurgeRequest) (*PurgeResult, error)
}

// Access is what an operator API may do: read, or also act.
type Access string

const (
	// AccessRead reads and counts (dry runs); every action is refused
	// with cause read_only.
	AccessRead Access = "read"
	// AccessAct also requeues, replays, expunges and runs the archiver.
	AccessAct Access = "act"
)

// Identity is who calls, as the API sees them.
type Identity struct {
	// Operator is the name actions are recorded under.
	Operator string `json:"operator"`
	// Verified: Operator was established by AWS IAM (the caller's
	// verified principal), not declared (webhookctl's --actor).
	Verified bool `json:"verified"`
	// Access is what the caller may do here.
	Access Access `json:"access"`
	// DatabaseRole is the role the API's statements run as, which the
	// operator actions' records keep too.
	DatabaseRole string `json:"database_role"`
}

// Operator is who performs the actions of a request: a front end puts it
// in the request's context (WithOperator), and Service records it with
// every action.
type Operator struct {
	// Name is recorded as the action's actor.
	Name string
	// Verified: the name is the caller's AWS principal, established by
	// IAM (the operator function); otherwise what the operator declared.
	Verified bool
}

type operatorKey struct{}

// WithOperator returns ctx carrying who performs the request's actions.
// The operator function sets the verified IAM principal; webhookctl and
// the console, with a direct path to the database, set what the operator
// declared. A remote client ignores it: the function decides.
func WithOperator(ctx context.Context, op Operator) context.Context {
	return context.WithValue(ctx, operatorKey{}, op)
}

// OperatorFrom returns the operator of ctx, if any.
func OperatorFrom(ctx context.Context) (Operator, bool) {
	op, ok := ctx.Value(operatorKey{}).(Operator)
	return op, ok && strings.TrimSpace(op.Name) != ""
}

// Limits of what one request may ask, so that every answer is a page,
// never a dump.
const (
	// DefaultLimit is a list's page when none is asked.
	DefaultLimit = 50
	// MaxLimit is the largest page of events, dead letters or actions.
	MaxLimit = 1000
	// MaxReasonBytes bounds an action's reason (the record's column).
	MaxReasonBytes = 2000
	// MaxFilterBytes bounds a text filter (a source, a type, an event id).
	MaxFilterBytes = 255
	// ReplayPerCall is the most events one Replay call resets; a larger
	// replay continues in further calls (ReplayResult.Next).
	ReplayPerCall = 10000
	// ArchiveBatchesPerCall is the most objects one ArchiveRun writes; a
	// larger run continues in further calls (ArchiveRunResult.Truncated).
	ArchiveBatchesPerCall = 20
)

// limit checks a page size, defaulting 0 to DefaultLimit.
func limit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultLimit, nil
	case n < 0 || n > MaxLimit:
		return 0, invalid("limit must be 1 to %d, got %d", MaxLimit, n)
	}
	return n, nil
}

// text checks a text filter: valid UTF-8 of at most MaxFilterBytes, no
// NUL (which Postgres refuses in text).
func text(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxFilterBytes || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", invalid("%s must be text of at most %d bytes", what, MaxFilterBytes)
	}
	return s, nil
}

// sourceAndType checks a selection's source and type filters (text), in
// place.
func sourceAndType(source, typ *string) (err error) {
	if *source, err = text("source", *source); err != nil {
		return err
	}
	*typ, err = text("type", *typ)
	return err
}

// keyset cuts rows, read one more than the page's n (the one more says
// whether another page follows), to n, and returns the next page's cursor:
// the last row's id, nil on the last page.
func keyset[T any](rows []T, n int, id func(T) int64) ([]T, *int64) {
	if len(rows) <= n {
		return rows, nil
	}
	rows = rows[:n]
	next := id(rows[n-1])
	return rows, &next
}

// reason checks an action's reason.
func reason(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxReasonBytes || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", invalid("the reason must be text of at most %d bytes", MaxReasonBytes)
	}
	return s, nil
}

// invalid is a request refused for one of its parameters.
func invalid(format string, args ...any) error {
	return inbox.Errorf(inbox.CauseInvalidArgument, format, args...)
}
