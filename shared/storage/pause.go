package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/internal/dbsqlc"
)

// The queries on webhook_pauses (queries/webhook_pauses.sql): the sources
// and handlers an operator paused. The events a pause holds are changed
// by EventHoldSource, EventHoldClaimed and EventRelease (event.go).

// PauseInsert records a pause; ok is false when that source or handler
// was already paused (nothing changed).
func (e executor) PauseInsert(ctx context.Context, p inbox.Pause) (bool, error) {
	switch {
	case p.Actor == "":
		return false, ErrNoActor
	case len(p.Actor) > maxActorBytes:
		return false, fmt.Errorf("the actor's name is longer than %d bytes", maxActorBytes)
	case len(p.Reason) > maxReasonBytes:
		return false, fmt.Errorf("the reason is longer than %d bytes", maxReasonBytes)
	}
	_, err := queries.PauseInsert(ctx, e.db, dbsqlc.PauseInsertParams{
		Scope: string(p.Scope), Name: p.Name, Now: p.PausedAt, Actor: p.Actor, Reason: p.Reason,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pause %s %s: %w", p.Scope, p.Name, err)
	}
	return true, nil
}

// PauseDelete removes a pause and returns it; ok is false when that
// source or handler was not paused.
func (e executor) PauseDelete(ctx context.Context, scope inbox.PauseScope, name string) (inbox.Pause, bool, error) {
	r, err := queries.PauseDelete(ctx, e.db, dbsqlc.PauseDeleteParams{Scope: string(scope), Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return inbox.Pause{}, false, nil
	}
	if err != nil {
		return inbox.Pause{}, false, fmt.Errorf("resume %s %s: %w", scope, name, err)
	}
	return inbox.Pause{Scope: scope, Name: name, PausedAt: r.PausedAt, Actor: r.Actor, Reason: r.Reason}, true, nil
}

// PauseList returns every pause, sources first, then by name.
func (e executor) PauseList(ctx context.Context) ([]inbox.Pause, error) {
	rows, err := queries.PauseList(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	out := make([]inbox.Pause, len(rows))
	for i, r := range rows {
		out[i] = inbox.Pause{Scope: inbox.PauseScope(r.Scope), Name: r.Name, PausedAt: r.PausedAt, Actor: r.Actor, Reason: r.Reason}
	}
	return out, nil
}
