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

func (c Criteria) isZero() bool {
	return c.IDs == nil && c.Cause == "" && c.Error == "" && c.Received.IsZero()
}

// ActionCursor is where an action done in several calls stands (a replay,
// a requeue, a resolve, a discard): its record, the last row done, and the last one
// the first call selected.
type ActionCursor = storage.ReplayCursor

// BulkPerCall is the most rows one Requeue, Resolve or Discard call
// changes; a larger one continues in further calls (Next).
const BulkPerCall = ReplayPerCall

// --- Resolve ---

// ResolveRequest asks to close the selected open dead letters without
// running their events again, or only to count them.
type ResolveRequest struct {
	Select DeadLetterSelection `json:"select"`
	// DryRun counts and changes nothing.
	DryRun bool `json:"dry_run,omitzero"`
	// Expect is the count the operator confirmed (the first call only):
	// when the selection now counts otherwise, nothing is resolved (cause
	// count_changed).
	Expect *int `json:"expect,omitempty"`
	// Reason is required: why these events will never run.
	Reason string `json:"reason,omitzero"`
	// Continue is the previous call's Next: the resolve goes on under the
	// same record, with its selection.
	Continue *ActionCursor `json:"continue,omitempty"`
	// Max is the most dead letters this call closes (0 and anything over
	// BulkPerCall: BulkPerCall).
	Max int `json:"max,omitzero"`
}

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
	sel, err := r.Select.check()
	if err != nil {
		return nil, err
	}
	if sel.empty() && r.Continue == nil {
		return nil, invalid("choose a dead letter, a source, a type, a cause, an error text, a time window, or every open dead letter (all)")
	}
	out, err := bulkAction(ctx, s, inbox.ActionResolve, bulkRequest{dryRun: r.DryRun, expect: r.Expect, reason: r.Reason, cont: r.Continue, max: r.Max}, sel.filter,
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

func (sel DiscardSelection) empty() bool {
	return !sel.All && sel.ID == 0 && sel.Source == "" && sel.Type == "" && sel.Criteria.isZero()
}

func (sel DiscardSelection) filter(now time.Time) storage.DiscardFilter {
	from, to := sel.Received.Bounds(now)
	return storage.DiscardFilter{ID: sel.ID, IDs: sel.IDs, Source: sel.Source, EventType: sel.Type, Cause: sel.Cause,
		ErrorText: sel.Error, ReceivedFrom: from, ReceivedTo: to, All: sel.All}
}

// DiscardRequest asks to make the selected unprocessed events never run,
// or only to count them.
type DiscardRequest struct {
	Select DiscardSelection `json:"select"`
	DryRun bool             `json:"dry_run,omitzero"`
	// Expect is the count the operator confirmed (the first call only).
	Expect *int `json:"expect,omitempty"`
	// Reason is required: why these events must never run.
	Reason   string        `json:"reason,omitzero"`
	Continue *ActionCursor `json:"continue,omitempty"`
	// Max is the most events this call discards (0 and anything over
	// BulkPerCall: BulkPerCall).
	Max int `json:"max,omitzero"`
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
	sel, err := r.Select.check()
	if err != nil {
		return nil, err
	}
	if sel.empty() && r.Continue == nil {
		return nil, invalid("choose an event, a source, a type, a cause, an error text, a receipt window, or every unprocessed event (all)")
	}
	out, err := bulkAction(ctx, s, inbox.ActionDiscard, bulkRequest{dryRun: r.DryRun, expect: r.Expect, reason: r.Reason, cont: r.Continue, max: r.Max}, sel.filter,
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

// bulkRequest is what Requeue, Resolve and Discard requests share.
type bulkRequest struct {
	dryRun bool
	expect *int
	reason string
	cont   *ActionCursor
	max    int
	// reasonOptional lets an action that loses nothing (a requeue) go
	// without a reason; one that closes events for good needs one.
	reasonOptional bool
}

// bulkAction counts, or checks the confirmed count and acts, in chunks
// (storage's bulk): a dry run reads one snapshot; an action needs a
// reason (unless reasonOptional); a continuation takes its selection from its own record (which
// must be this operator's action of this kind), so that a relative window
// does not move between calls.
func bulkAction[F any](ctx context.Context, s *Service, kind string, r bulkRequest, filter func(now time.Time) F,
	run func(ex storage.Executor, f F, o storage.BulkOptions) (storage.BulkResult, error)) (storage.BulkResult, error) {
	var out storage.BulkResult
	if r.dryRun {
		if r.cont != nil {
			return out, invalid("a dry run counts the whole selection: it continues nothing")
		}
		err := s.read(ctx, func(tx *storage.Tx, now time.Time) error {
			var err error
			out, err = run(tx, filter(now), storage.BulkOptions{Now: now, DryRun: true})
			return err
		})
		return out, err
	}
	by, err := s.actor(ctx, r.reason)
	if err != nil {
		return out, err
	}
	if by.Reason == "" && !r.reasonOptional {
		return out, invalid("a %s needs a reason: say why these events will never run", kind)
	}
	now, err := s.deps.Store.PGNow(ctx)
	if err != nil {
		return out, classify(err)
	}
	f := filter(now)
	if r.cont != nil {
		if f, err = continued[F](ctx, s, kind, *r.cont, by); err != nil {
			return out, err
		}
	} else if r.expect != nil {
		dry, err := run(s.deps.Store, f, storage.BulkOptions{Now: now, DryRun: true})
		if err != nil {
			return out, classify(err)
		}
		if dry.Matched != *r.expect {
			return out, countChanged(dry.Matched, *r.expect, kind)
		}
	}
	max := r.max
	if max <= 0 || max > BulkPerCall {
		max = BulkPerCall
	}
	out, err = run(s.deps.Store, f, storage.BulkOptions{Now: now, By: by, Max: max, Continue: r.cont})
	return out, classify(err)
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
