package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_operator_actions (queries/webhook_operator_actions.sql):
// the record of every operator action. The actions done in chunks
// (EventReplay, and the bulk ones: DeadLetterRequeue, DeadLetterResolve,
// EventDiscard) write theirs themselves.

// maxActorBytes and maxReasonBytes are the columns' bounds.
const (
	maxActorBytes  = 200
	maxReasonBytes = 2000
)

// actionArgs checks who and why, and turns the selection into JSON.
func actionArgs(by inbox.Actor, selection any) (string, error) {
	switch {
	case by.Name == "":
		return "", ErrNoActor
	case len(by.Name) > maxActorBytes:
		return "", fmt.Errorf("the actor's name is longer than %d bytes", maxActorBytes)
	case len(by.Reason) > maxReasonBytes:
		return "", fmt.Errorf("the reason is longer than %d bytes", maxReasonBytes)
	}
	b, err := json.Marshal(selection)
	if err != nil {
		return "", fmt.Errorf("record the selection: %w", err)
	}
	return string(b), nil
}

// operatorActionStart records an action whose events come in chunks (a
// replay, a bulk action) and returns its id.
func (e executor) operatorActionStart(ctx context.Context, action string, by inbox.Actor, selection any) (int64, error) {
	sel, err := actionArgs(by, selection)
	if err != nil {
		return 0, err
	}
	id, err := queries.OperatorActionInsert(ctx, e.db, dbsqlc.OperatorActionInsertParams{Kind: action, Actor: by.Name, Selection: sel, Reason: by.Reason})
	if err != nil {
		return 0, fmt.Errorf("record the %s: %w", action, err)
	}
	return id, nil
}

// OperatorActionRecord records an action and the events it changed; run
// it in the transaction that changes them.
func (e executor) OperatorActionRecord(ctx context.Context, action string, by inbox.Actor, selection any, eventIDs []int64) (int64, error) {
	sel, err := actionArgs(by, selection)
	if err != nil {
		return 0, err
	}
	if eventIDs == nil {
		eventIDs = []int64{}
	}
	id, err := queries.OperatorActionRecord(ctx, e.db, dbsqlc.OperatorActionRecordParams{
		Kind: action, Actor: by.Name, Selection: sel, Reason: by.Reason, EventIDs: eventIDs,
	})
	if err != nil {
		return 0, fmt.Errorf("record the %s: %w", action, err)
	}
	return id, nil
}

// OperatorActionList returns the actions since since (zero: any time),
// newest first, at most limit.
func (e executor) OperatorActionList(ctx context.Context, since time.Time, limit int) ([]inbox.OperatorAction, error) {
	rows, err := queries.OperatorActionList(ctx, e.db, dbsqlc.OperatorActionListParams{Since: timePtr(since), Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	return actionsFromRows(rows), nil
}

// ErrActionNotFound is returned (wrapped) when no action has the id.
var ErrActionNotFound = errors.New("operator action not found")

// OperatorActionGetByID returns one action's record.
func (e executor) OperatorActionGetByID(ctx context.Context, id int64) (inbox.OperatorAction, error) {
	row, err := queries.OperatorActionGetByID(ctx, e.db, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.OperatorAction{}, fmt.Errorf("operator action %d: %w", id, ErrActionNotFound)
	}
	if err != nil {
		return inbox.OperatorAction{}, fmt.Errorf("read operator action %d: %w", id, err)
	}
	return actionsFromRows([]dbsqlc.WebhookOperatorAction{row})[0], nil
}

// OperatorActionListPage returns a page of the actions since since (zero:
// any time), newest first, before the cursor before (the last id of the
// previous page; 0 for the first), at most limit. Keyset paging: actions
// recorded in between never shift a page.
func (e executor) OperatorActionListPage(ctx context.Context, since time.Time, before int64, limit int) ([]inbox.OperatorAction, error) {
	rows, err := queries.OperatorActionListPage(ctx, e.db, dbsqlc.OperatorActionListPageParams{Before: ptr(before), Since: timePtr(since), Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	return actionsFromRows(rows), nil
}

// OperatorActionListByEvent returns the actions that changed an event,
// oldest first.
func (e executor) OperatorActionListByEvent(ctx context.Context, eventPK int64) ([]inbox.OperatorAction, error) {
	rows, err := queries.OperatorActionListByEvent(ctx, e.db, eventPK)
	if err != nil {
		return nil, fmt.Errorf("list the operator actions of event %d: %w", eventPK, err)
	}
	return actionsFromRows(rows), nil
}

func actionsFromRows(rows []dbsqlc.WebhookOperatorAction) []inbox.OperatorAction {
	out := make([]inbox.OperatorAction, len(rows))
	for i, r := range rows {
		out[i] = inbox.OperatorAction{
			ID: r.ID, Action: r.Action, Actor: r.Actor, DBUser: r.DBUser, At: r.At,
			Filter: json.RawMessage(r.Filter), Events: int(r.Events), Reason: r.Reason,
		}
	}
	return out
}

// OperatorActionRecordCounted records an action that changed events
// events without linking each (a pause or a resume: a whole backlog);
// run it in the transaction that changes them.
func (e executor) OperatorActionRecordCounted(ctx context.Context, action string, by inbox.Actor, selection any, events int) (int64, error) {
	sel, err := actionArgs(by, selection)
	if err != nil {
		return 0, err
	}
	id, err := queries.OperatorActionRecordCounted(ctx, e.db, dbsqlc.OperatorActionRecordCountedParams{
		Kind: action, Actor: by.Name, Selection: sel, Reason: by.Reason, Events: int32(events),
	})
	if err != nil {
		return 0, fmt.Errorf("record the %s: %w", action, err)
	}
	return id, nil
}

// BulkOptions tunes an action done in chunks: DeadLetterRequeue,
// DeadLetterResolve, EventDiscard and EventReplay (ReplayOptions).
type BulkOptions struct {
	// Now is the time the action stamps on what it changes (use PGNow).
	Now time.Time
	// DryRun counts and changes nothing.
	DryRun bool
	// By is who acts, and why: required unless DryRun.
	By inbox.Actor
	// Max bounds how many rows this call changes (0: every one): an
	// action too large for one request is done in several calls, each
	// continuing the one before (Continue), all under one record.
	Max int
	// Continue resumes an action an earlier call left unfinished (its
	// result's Next), with the same filter.
	Continue *ReplayCursor
	// Expect, when set, is the count the operator confirmed: the first
	// call refuses (ErrCountChanged, with Matched the count now) before
	// it records or changes anything when its own count, the one that
	// bounds the action, is another. A count taken apart from the action
	// could agree and the action then take rows that joined the
	// selection between the two.
	Expect *int
	// chunk is how many rows one statement changes; default 1000. The
	// package's tests reach it through export_test.go.
	chunk int
}

// BulkResult is what an action done in chunks matched and did.
type BulkResult struct {
	// Matched is what the filter selected when the action was counted
	// (a dry run, or the first call); 0 for a continuation.
	Matched int
	// Done is how many this call changed: below what it took only if some
	// changed between the selection and their chunk.
	Done int
	// ActionID is the action's record; 0 for a dry run.
	ActionID int64
	// Next, when set, is where the next call continues; nil when done.
	Next *ReplayCursor
}

// ErrCountChanged is returned for an action whose selection no longer
// counts what the operator confirmed (BulkOptions.Expect): nothing was
// changed or recorded.
var ErrCountChanged = errors.New("the selection's count is not the one confirmed")

// bulkQueries are an action's three statements: the count (and the
// highest id selected, which bounds the whole action), the ids in order
// (after, through, at most max; nil: unbounded), and the change of a
// chunk, which links the rows' events to the record and adds them to its
// count in the same statement.
type bulkQueries struct {
	count func(ctx context.Context) (n, lastID int64, err error)
	list  func(ctx context.Context, after, through *int64, max *int32) ([]int64, error)
	apply func(ctx context.Context, ids []int64, actionID int64) (int64, error)
}

// bulk runs an action in chunks, as EventReplay does: counted (the count
// held to opts.Expect when given), recorded
// (who, why, the filter) before the first chunk, then each chunk changed,
// linked and counted by one statement that commits on its own when e is
// the pool. An action stopped between calls (or cut short by an error)
// leaves a record whose count is exactly what was changed; continuing it
// (Continue) takes the rest of the first call's selection, never beyond
// its highest id.
func (e executor) bulk(ctx context.Context, action string, selection any, opts BulkOptions, q bulkQueries) (BulkResult, error) {
	var res BulkResult
	if opts.chunk <= 0 {
		opts.chunk = 1000
	}
	var after, through *int64
	var max *int32
	if opts.Max > 0 {
		max = new(int32(opts.Max))
	}
	if c := opts.Continue; c != nil {
		if opts.DryRun || c.ActionID <= 0 || c.Through <= 0 {
			return res, fmt.Errorf("%s: a continuation needs the cursor of an earlier call, and is no dry run", action)
		}
		if opts.By.Name == "" {
			return res, ErrNoActor
		}
		res.ActionID = c.ActionID
		after, through = &c.After, &c.Through
	} else {
		n, last, err := q.count(ctx)
		if err != nil {
			return res, fmt.Errorf("%s: count: %w", action, err)
		}
		res.Matched = int(n)
		if opts.DryRun {
			return res, nil
		}
		if opts.Expect != nil && res.Matched != *opts.Expect {
			return res, ErrCountChanged
		}
		if opts.By.Name == "" {
			return res, ErrNoActor
		}
		through = &last
	}
	ids, err := q.list(ctx, after, through, max)
	if err != nil {
		return res, fmt.Errorf("%s: select: %w", action, err)
	}
	if opts.Continue == nil {
		if res.ActionID, err = e.operatorActionStart(ctx, action, opts.By, selection); err != nil {
			return res, fmt.Errorf("%s: %w", action, err)
		}
	}
	if max != nil && len(ids) == opts.Max && ids[len(ids)-1] < *through {
		res.Next = &ReplayCursor{ActionID: res.ActionID, After: ids[len(ids)-1], Through: *through}
	}
	for len(ids) > 0 {
		chunk := ids[:min(opts.chunk, len(ids))]
		ids = ids[len(chunk):]
		n, err := q.apply(ctx, chunk, res.ActionID)
		if err != nil {
			return res, fmt.Errorf("%s: %d changed before: %w", action, res.Done, err)
		}
		res.Done += int(n)
	}
	return res, nil
}
