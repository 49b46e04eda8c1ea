package operations

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// MaxIDs bounds a selection's explicit list of ids.
const MaxIDs = 1000

// Criteria are the filters every bulk action's selection (requeue, replay,
// resolve, discard) and the dead-letter list take beside their own: the
// rows named by id, the failure cause and error text of the event's last
// attempt, and when the event was received. Every criterion given must
// match.
type Criteria struct {
	// IDs names rows explicitly: dead letters' ids in a dead-letter
	// selection, events' ids in an event selection.
	IDs []int64 `json:"ids,omitempty"`
	// Cause is the cause of the event's last attempt (for a dead letter,
	// the attempt that killed it): handler_error, handler_timeout...
	Cause string `json:"cause,omitzero"`
	// Error is a case-insensitive substring of the last error's text.
	Error string `json:"error,omitzero"`
	// Received bounds when the event was received.
	Received Window `json:"received,omitzero"`
}

func (c Criteria) check() (Criteria, error) {
	var err error
	if len(c.IDs) > MaxIDs {
		return c, invalid("at most %d ids, got %d", MaxIDs, len(c.IDs))
	}
	for _, id := range c.IDs {
		if id <= 0 {
			return c, invalid("not an id: %d", id)
		}
	}
	if len(c.IDs) == 0 {
		// An empty list is no list: it must not select nothing silently,
		// nor everything.
		c.IDs = nil
	}
	if c.Cause, err = text("cause", c.Cause); err != nil {
		return c, err
	}
	if c.Error, err = text("error", c.Error); err != nil {
		return c, err
	}
	return c, c.Received.check()
}

// IsZero reports criteria that narrow nothing.
func (c Criteria) IsZero() bool {
	return len(c.IDs) == 0 && c.Cause == "" && c.Error == "" && c.Received.IsZero()
}

// ActionCursor is where an action done in several calls stands (a replay,
// a requeue, a resolve, a discard): its record, the last row done, and the last one
// the first call selected.
type ActionCursor = storage.ReplayCursor

// BulkPerCall is the most rows one Requeue, Resolve or Discard call
// changes; a larger one continues in further calls (Next).
const BulkPerCall = ReplayPerCall

// BulkRequest asks for an action on a selection (a requeue, a replay, a
// resolve, a discard), done in one call or continued in several under one
// record, or only for its count.
type BulkRequest[S any] struct {
	Select S `json:"select"`
	// DryRun counts and changes nothing: what a read-only API answers.
	DryRun bool `json:"dry_run,omitzero"`
	// Expect is the count the operator confirmed (the first call only):
	// when set and the selection now counts otherwise, nothing is changed
	// (cause count_changed) and the new count is in the error's message.
	Expect *int `json:"expect,omitempty"`
	// Reason is recorded with the action; a resolve and a discard, which
	// close events for good, require one.
	Reason string `json:"reason,omitzero"`
	// Continue is the previous call's Next: the action goes on under the
	// same record, with its selection.
	Continue *ActionCursor `json:"continue,omitempty"`
	// Max is the most rows this call changes (0 and anything over
	// BulkPerCall, ReplayPerCall for a replay: that many).
	Max int `json:"max,omitzero"`
}

// The requests of the actions done in chunks: one shape, the selection
// of each.
type (
	RequeueRequest = BulkRequest[DeadLetterSelection]
	ResolveRequest = BulkRequest[DeadLetterSelection]
	DiscardRequest = BulkRequest[DiscardSelection]
	ReplayRequest  = BulkRequest[ReplaySelection]
)

// emptySelection is the refusal of an action whose selection names
// nothing (IsZero): it must not act on nothing silently, nor on
// everything.
const emptySelection = "the selection is empty: give an id or a filter, or all to select every one"

// --- Resolve ---

// ResolveResult is what a resolve call matched and did.
type ResolveResult struct {
	DryRun bool `json:"dry_run"`
	// Matched is the events the selection counts (the first call: the
	// whole resolve's; 0 for a continuation); Resolved what this call
	// closed.
	Matched  int   `json:"matched"`
	Resolved int   `json:"resolved"`
	ActionID int64 `json:"action_id"`
	// Next continues a resolve this call did not finish; null when done.
	Next *ActionCursor `json:"next"`
}

// Resolve closes the selected open dead letters without running their
// events again: each dead letter is marked resolved (it leaves every open
// count, the DeadLettersOpen gauge and its alarm), and its event is
// finished as it stands, outcome resolved. Recorded with who and why; a
// large resolve is done in several calls under one record.
func (s *Service) Resolve(ctx context.Context, r ResolveRequest) (*ResolveResult, error) {
	sel, out, err := bulkAction(ctx, s, inbox.ActionResolve, r, false,
		func(ex storage.Executor, f storage.DeadLetterFilter, o storage.BulkOptions) (storage.BulkResult, error) {
			return ex.DeadLetterResolve(ctx, f, o)
		})
	if err != nil {
		return nil, err
	}
	res := &ResolveResult{DryRun: r.DryRun, Matched: out.Matched, Resolved: out.Done, ActionID: out.ActionID, Next: out.Next}
	if !r.DryRun {
		op, _ := OperatorFrom(ctx)
		s.log.Info("operations: dead letters resolved", "operator", op.Name, "events", res.Resolved, "action_id", res.ActionID,
			"more", res.Next != nil, "source", sel.Source, "event_type", sel.Type, "cause", sel.Cause, "all", sel.All)
		if res.Resolved > 0 && res.Next == nil {
			// Nothing is due, but the DeadLettersOpen gauge is on the
			// processor's line: a run writes the lower figure, which
			// clears the alarm once none is open, as after a requeue.
			s.wake(ctx)
		}
	}
	return res, nil
}

// --- Discard ---

// DiscardSelection selects unprocessed events (due now or later, retrying
// or claimed; never dead ones) to discard: one by its id, or by source,
// type and the criteria; All, explicitly, every one.
type DiscardSelection struct {
	ID     int64  `json:"id,omitzero"`
	Source string `json:"source,omitzero"`
	Type   string `json:"type,omitzero"`
	Criteria
	All bool `json:"all,omitzero"`
}

func (sel DiscardSelection) check() (DiscardSelection, error) {
	var err error
	if sel.ID < 0 {
		return sel, invalid("not an event's id: %d", sel.ID)
	}
	if err = sourceAndType(&sel.Source, &sel.Type); err != nil {
		return sel, err
	}
	sel.Criteria, err = sel.Criteria.check()
	return sel, err
}

// IsZero reports a selection that names nothing (and is not All): every
// action refuses it.
func (sel DiscardSelection) IsZero() bool {
	return !sel.All && sel.ID == 0 && sel.Source == "" && sel.Type == "" && sel.Criteria.IsZero()
}

func (sel DiscardSelection) filter(now time.Time) storage.DiscardFilter {
	from, to := sel.Received.Bounds(now)
	return storage.DiscardFilter{ID: sel.ID, IDs: sel.IDs, Source: sel.Source, EventType: sel.Type, Cause: sel.Cause,
		ErrorText: sel.Error, ReceivedFrom: from, ReceivedTo: to, All: sel.All}
}

// DiscardResult is what a discard call matched and did.
type DiscardResult struct {
	DryRun bool `json:"dry_run"`
	// Matched is what the selection counts (the first call: the whole
	// discard's; 0 for a continuation); Discarded what this call
	// finished. An event a processor was running when the discard reached
	// it, and processed, is not discarded: it ran first.
	Matched   int           `json:"matched"`
	Discarded int           `json:"discarded"`
	ActionID  int64         `json:"action_id"`
	Next      *ActionCursor `json:"next"`
}

// Discard finishes the selected unprocessed events without running them
// (outcome discarded): no processor claims them again, and one running
// such an event when the discard reaches it is waited for (the event's
// row lock): if it processed the event, the event stays processed and is
// not counted; otherwise it never runs it. The body stays, and the
// archiver archives it. Recorded with who and why; a large discard is done
// in several calls under one record.
func (s *Service) Discard(ctx context.Context, r DiscardRequest) (*DiscardResult, error) {
	sel, out, err := bulkAction(ctx, s, inbox.ActionDiscard, r, false,
		func(ex storage.Executor, f storage.DiscardFilter, o storage.BulkOptions) (storage.BulkResult, error) {
			return ex.EventDiscard(ctx, f, o)
		})
	if err != nil {
		return nil, err
	}
	res := &DiscardResult{DryRun: r.DryRun, Matched: out.Matched, Discarded: out.Done, ActionID: out.ActionID, Next: out.Next}
	if !r.DryRun {
		op, _ := OperatorFrom(ctx)
		s.log.Info("operations: events discarded", "operator", op.Name, "events", res.Discarded, "action_id", res.ActionID,
			"more", res.Next != nil, "event", sel.ID, "source", sel.Source, "event_type", sel.Type, "cause", sel.Cause, "all", sel.All)
	}
	return res, nil
}

// selector is the selection of an action done in chunks: checked,
// refused when it names nothing, and read as storage's filter on the
// database's clock.
type selector[S, F any] interface {
	check() (S, error)
	IsZero() bool
	filter(now time.Time) F
}

// bulkAction checks r's selection (one naming nothing is refused, unless
// the request continues an action), then counts, or acts in chunks
// (storage's bulk): a dry run reads one snapshot; an action needs a
// reason (unless reasonOptional: an action that loses nothing); a
// continuation takes its selection from its own record (which must be
// this operator's action of this kind), so that a relative window does
// not move between calls. Expect is held to the count that bounds the
// action, taken by storage's bulk before it records or changes anything.
func bulkAction[S selector[S, F], F any](ctx context.Context, s *Service, kind string, r BulkRequest[S], reasonOptional bool,
	run func(ex storage.Executor, f F, o storage.BulkOptions) (storage.BulkResult, error)) (S, storage.BulkResult, error) {
	var out storage.BulkResult
	sel, err := r.Select.check()
	if err != nil {
		return sel, out, err
	}
	if sel.IsZero() && r.Continue == nil {
		return sel, out, invalid(emptySelection)
	}
	if r.DryRun {
		if r.Continue != nil {
			return sel, out, invalid("a dry run counts the whole selection: it continues nothing")
		}
		err := s.read(ctx, func(tx *storage.Tx, now time.Time) error {
			var err error
			out, err = run(tx, sel.filter(now), storage.BulkOptions{Now: now, DryRun: true})
			return err
		})
		return sel, out, err
	}
	by, err := s.actor(ctx, r.Reason)
	if err != nil {
		return sel, out, err
	}
	if by.Reason == "" && !reasonOptional {
		return sel, out, invalid("a %s needs a reason: say why these events will never run", kind)
	}
	now, err := s.deps.Store.PGNow(ctx)
	if err != nil {
		return sel, out, classify(err)
	}
	f := sel.filter(now)
	if r.Continue != nil {
		if f, err = continued[F](ctx, s, kind, *r.Continue, by); err != nil {
			return sel, out, err
		}
	}
	max := r.Max
	if max <= 0 || max > BulkPerCall {
		max = BulkPerCall
	}
	out, err = run(s.deps.Store, f, storage.BulkOptions{Now: now, By: by, Max: max, Continue: r.Continue, Expect: r.Expect})
	if errors.Is(err, storage.ErrCountChanged) {
		return sel, out, countChanged(out.Matched, *r.Expect, kind, "events")
	}
	return sel, out, classify(err)
}

// continued is the selection of the action c continues, read from its
// record: it must be this operator's action of this kind.
func continued[F any](ctx context.Context, s *Service, kind string, c ActionCursor, by inbox.Actor) (F, error) {
	var f F
	act, err := s.deps.Store.OperatorActionGetByID(ctx, c.ActionID)
	if errors.Is(err, storage.ErrActionNotFound) {
		return f, invalid("continue: no %s was recorded as action %d", kind, c.ActionID)
	}
	if err != nil {
		return f, classify(err)
	}
	if act.Action != kind || act.Actor != by.Name {
		return f, invalid("continue: action %d is not this operator's %s", c.ActionID, kind)
	}
	if err := json.Unmarshal(act.Filter, &f); err != nil {
		return f, classify(err)
	}
	return f, nil
}
