package operations

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Pause is a source or a handler paused now: its events are received and
// stored as ever, but wait until it is resumed.
type Pause struct {
	// Scope is source or handler; Name the source's name or the
	// handler's route, as `webhookctl handlers` prints it.
	Scope    inbox.PauseScope `json:"scope"`
	Name     string           `json:"name"`
	PausedAt time.Time        `json:"paused_at"`
	Actor    string           `json:"actor"`
	Reason   *string          `json:"reason"`
}

func pausesOf(ps []inbox.Pause) []Pause {
	out := make([]Pause, len(ps))
	for i, p := range ps {
		out[i] = Pause{Scope: p.Scope, Name: p.Name, PausedAt: p.PausedAt, Actor: p.Actor, Reason: orNull(p.Reason)}
	}
	return out
}

// PauseRequest asks to pause or to resume a source or a handler, or only
// to count what that would hold or release.
type PauseRequest struct {
	// Scope is source or handler.
	Scope inbox.PauseScope `json:"scope"`
	// Name is the source's name, or the handler's route as `webhookctl
	// handlers` prints it ("source stripe, type invoice.paid", "kind
	// github, any type", "fallback").
	Name string `json:"name"`
	// DryRun counts and changes nothing.
	DryRun bool `json:"dry_run,omitzero"`
	// Expect is the count the operator confirmed: when set and the
	// count is now another, nothing changes (cause count_changed).
	Expect *int `json:"expect,omitempty"`
	// Reason is recorded with the action, and with the pause.
	Reason string `json:"reason,omitzero"`
}

// PauseResult is what a pause or a resume held or released (or would).
type PauseResult struct {
	DryRun bool             `json:"dry_run"`
	Scope  inbox.PauseScope `json:"scope"`
	Name   string           `json:"name"`
	// Events is what the pause held at once (the source's waiting
	// events; a handler's are held as the processor meets them, so 0),
	// or what the resume released.
	Events int `json:"events"`
	// Paused says whether it is paused before the action (a dry run) or
	// after it.
	Paused   bool  `json:"paused"`
	ActionID int64 `json:"action_id"`
}

// check validates the scope and the name: a source's name, or a route in
// the form the processor's Route.String gives.
func (r PauseRequest) check() (PauseRequest, error) {
	name, err := text("name", r.Name)
	if err != nil {
		return r, err
	}
	r.Name = name
	switch r.Scope {
	case inbox.PauseSource:
		if name == "" {
			return r, invalid("name the source to pause or resume")
		}
	case inbox.PauseHandler:
		if !routeLike(name) {
			return r, invalid(`a handler is named by its route, as 'webhookctl handlers' lists it: "source NAME, type TYPE", "source NAME, any type", "kind KIND, type TYPE", "kind KIND, any type" or "fallback"`)
		}
	default:
		return r, invalid("scope must be %s or %s", inbox.PauseSource, inbox.PauseHandler)
	}
	return r, nil
}

// routeLike reports whether name is a route as the processor's
// Route.String writes it. Whether that route is registered is the
// processor's to know: a pause of a route it never routes to holds
// nothing.
func routeLike(name string) bool {
	if name == "fallback" {
		return true
	}
	match, typ, ok := strings.Cut(name, ", ")
	if !ok {
		return false
	}
	what, ident, ok := strings.Cut(match, " ")
	if !ok || (what != "source" && what != "kind") || ident == "" {
		return false
	}
	return typ == "any type" || (strings.HasPrefix(typ, "type ") && len(typ) > len("type "))
}

// Pause pauses a source or a handler: the pause's row, the hold of the
// source's waiting events (a handler's are held by the processor as it
// claims them: routing is the processor's) and the action's record, in
// one transaction. Pausing what is paused is refused (already_paused).
func (s *Service) Pause(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return s.pauseOrResume(ctx, r, true)
}

// Resume resumes a source or a handler: the pause's row goes, the events
// it held are due again when they were due (or at once), and the action
// is recorded, in one transaction; then the processor is woken. Resuming
// what is not paused is refused (not_paused).
func (s *Service) Resume(ctx context.Context, r PauseRequest) (*PauseResult, error) {
	return s.pauseOrResume(ctx, r, false)
}

func (s *Service) pauseOrResume(ctx context.Context, r PauseRequest, pause bool) (*PauseResult, error) {
	r, err := r.check()
	if err != nil {
		return nil, err
	}
	hold := inbox.HoldOf(r.Scope, r.Name)
	source := ""
	if r.Scope == inbox.PauseSource {
		source = r.Name
	}
	res := &PauseResult{DryRun: r.DryRun, Scope: r.Scope, Name: r.Name}
	kind := inbox.ActionResume
	if pause {
		kind = inbox.ActionPause
	}
	confirm := confirmed{dryRun: r.DryRun, expect: r.Expect, reason: r.Reason, what: string(r.Scope) + " " + verb(pause), of: "events"}
	// The count is what the action would change: the events a pause holds
	// at once, or those a resume releases.
	count := func(tx *storage.Tx, _ time.Time) (int, error) {
		n, err := tx.EventCountHeld(ctx, hold, source)
		if err != nil {
			return 0, err
		}
		ps, err := tx.PauseList(ctx)
		res.Paused = slices.ContainsFunc(ps, func(p inbox.Pause) bool { return p.Scope == r.Scope && p.Name == r.Name })
		res.Events = n.Held
		if pause {
			res.Events = n.Waiting
		}
		return res.Events, err
	}
	by, err := s.actInTx(ctx, confirm, count, func(tx *storage.Tx, now time.Time, by inbox.Actor) (err error) {
		if pause {
			res.Events, err = pauseNow(ctx, tx, inbox.Pause{Scope: r.Scope, Name: r.Name, PausedAt: now, Actor: by.Name, Reason: by.Reason}, source)
		} else {
			res.Events, err = resumeNow(ctx, tx, r.Scope, r.Name, now)
		}
		if err != nil {
			return err
		}
		sel := map[string]string{"scope": string(r.Scope), "name": r.Name}
		res.ActionID, err = tx.OperatorActionRecordCounted(ctx, kind, by, sel, res.Events)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.DryRun {
		return res, nil
	}
	res.Paused = pause
	s.log.Info("operations: "+string(r.Scope)+" "+verb(pause)+"d", "operator", by.Name, "scope", r.Scope, "name", r.Name,
		"events", res.Events, "action_id", res.ActionID)
	if !pause && res.Events > 0 {
		s.wake(ctx)
	}
	return res, nil
}

func verb(pause bool) string {
	if pause {
		return "pause"
	}
	return "resume"
}

// pauseNow inserts the pause p and holds the waiting events of its source
// (none for a handler's pause); it returns how many it held.
func pauseNow(ctx context.Context, tx *storage.Tx, p inbox.Pause, source string) (int, error) {
	ok, err := tx.PauseInsert(ctx, p)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, inbox.Errorf(inbox.CauseAlreadyPaused, "%s %q is already paused: nothing was changed", p.Scope, p.Name)
	}
	if source == "" {
		return 0, nil
	}
	return tx.EventHoldSource(ctx, source)
}

// resumeNow deletes the pause and releases the events it held, due when
// they were due (or at now); it returns how many it released.
func resumeNow(ctx context.Context, tx *storage.Tx, scope inbox.PauseScope, name string, now time.Time) (int, error) {
	_, ok, err := tx.PauseDelete(ctx, scope, name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, inbox.Errorf(inbox.CauseNotPaused, "%s %q is not paused: nothing was changed", scope, name)
	}
	return tx.EventRelease(ctx, inbox.HoldOf(scope, name), now)
}
