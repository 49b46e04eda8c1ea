package operations

import (
	"context"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// DeadLetterQuery asks for a page of the open dead letters, in the order
// they died.
type DeadLetterQuery struct {
	// ID is one dead letter.
	ID     int64  `json:"id,omitzero"`
	Source string `json:"source,omitzero"`
	Type   string `json:"type,omitzero"`
	// Window bounds when they died.
	Window Window `json:"window,omitzero"`
	// Criteria narrow the list as they narrow a requeue or a resolve.
	Criteria
	// After pages on (the previous page's NextAfter).
	After int64 `json:"after,omitzero"`
	Limit int   `json:"limit,omitzero"`
}

// DeadLetterPage is a page of open dead letters.
type DeadLetterPage struct {
	At          time.Time    `json:"at"`
	DeadLetters []DeadLetter `json:"dead_letters"`
	// NextAfter is the cursor of the next page; null on the last.
	NextAfter *int64 `json:"next_after"`
}

// DeadLetters reads a page of the open dead letters in one snapshot.
func (s *Service) DeadLetters(ctx context.Context, q DeadLetterQuery) (*DeadLetterPage, error) {
	n, err := limit(q.Limit)
	if err != nil {
		return nil, err
	}
	sel, err := DeadLetterSelection{ID: q.ID, Source: q.Source, Type: q.Type, Window: q.Window, Criteria: q.Criteria}.check()
	if err != nil {
		return nil, err
	}
	if q.After < 0 {
		return nil, invalid("after must be a dead letter's id")
	}
	p := &DeadLetterPage{}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		p.At = now
		dls, err := tx.DeadLetterListPage(ctx, sel.filter(now), q.After, n+1)
		if err != nil {
			return err
		}
		dls, p.NextAfter = keyset(dls, n, func(d *inbox.DeadLetter) int64 { return d.ID })
		p.DeadLetters = deadLettersOf(dls)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DeadLetterSelection selects open dead letters for a requeue or a
// resolve: one by its id, or by source, type, when they died and the
// criteria; All, explicitly, every one.
type DeadLetterSelection struct {
	ID     int64  `json:"id,omitzero"`
	Source string `json:"source,omitzero"`
	Type   string `json:"type,omitzero"`
	Window Window `json:"window,omitzero"`
	Criteria
	All bool `json:"all,omitzero"`
}

func (sel DeadLetterSelection) check() (DeadLetterSelection, error) {
	var err error
	if sel.ID < 0 {
		return sel, invalid("not a dead letter's id: %d", sel.ID)
	}
	if err = sourceAndType(&sel.Source, &sel.Type); err != nil {
		return sel, err
	}
	if sel.Criteria, err = sel.Criteria.check(); err != nil {
		return sel, err
	}
	return sel, sel.Window.check()
}

// IsZero reports a selection that names nothing (and is not All): every
// action refuses it.
func (sel DeadLetterSelection) IsZero() bool {
	return !sel.All && sel.ID == 0 && sel.Source == "" && sel.Type == "" && sel.Window.IsZero() && sel.Criteria.IsZero()
}

func (sel DeadLetterSelection) filter(now time.Time) storage.DeadLetterFilter {
	from, to := sel.Window.Bounds(now)
	rfrom, rto := sel.Received.Bounds(now)
	return storage.DeadLetterFilter{ID: sel.ID, Source: sel.Source, EventType: sel.Type, DeadFrom: from, DeadTo: to,
		IDs: sel.IDs, Cause: sel.Cause, ErrorText: sel.Error, ReceivedFrom: rfrom, ReceivedTo: rto, All: sel.All}
}

// RequeueResult is how many events a requeue call sent back (or would).
type RequeueResult struct {
	DryRun bool `json:"dry_run"`
	// Events is what this call sent back; for a dry run, what the
	// selection counts.
	Events int `json:"events"`
	// Matched is what the selection counts (a dry run, or the first call:
	// the whole requeue's; 0 for a continuation).
	Matched int `json:"matched"`
	// ActionID is the requeue's record; 0 for a dry run.
	ActionID int64 `json:"action_id,omitzero"`
	// Next continues a requeue this call did not finish; null when done.
	Next *ActionCursor `json:"next"`
}

// Requeue sends the selected open dead letters back to the processor, due
// at once, each a new run with its failures reset (attempts and history
// stay); each dead letter keeps its copy, marked requeued. It is recorded
// with who and why; each chunk's events are linked to the record, and
// added to its count, in the statement that changes them. A large requeue
// is done in several calls under one record.
func (s *Service) Requeue(ctx context.Context, r RequeueRequest) (*RequeueResult, error) {
	// A requeue runs the events again: nothing is lost, so, as before
	// requeues came in chunks, a reason is welcome, not required.
	sel, out, err := bulkAction(ctx, s, inbox.ActionRequeue, r, true,
		func(ex storage.Executor, f storage.DeadLetterFilter, o storage.BulkOptions) (storage.BulkResult, error) {
			return ex.DeadLetterRequeue(ctx, f, o)
		})
	if err != nil {
		return nil, err
	}
	res := &RequeueResult{DryRun: r.DryRun, Events: out.Done, Matched: out.Matched, ActionID: out.ActionID, Next: out.Next}
	if r.DryRun {
		res.Events = out.Matched
		return res, nil
	}
	op, _ := OperatorFrom(ctx)
	s.log.Info("operations: dead letters requeued", "operator", op.Name, "events", res.Events, "action_id", res.ActionID,
		"more", res.Next != nil, "dead_letter", sel.ID, "source", sel.Source, "event_type", sel.Type, "all", sel.All)
	if res.Events > 0 {
		// Each call's events are due at once: the processor starts on
		// them while the rest are still being requeued.
		s.wake(ctx)
	}
	return res, nil
}
