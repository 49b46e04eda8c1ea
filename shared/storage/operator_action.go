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
// the record of every replay, requeue and expunge. EventReplay and
// DeadLetterRequeue write theirs themselves.

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
// replay) and returns its id.
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
