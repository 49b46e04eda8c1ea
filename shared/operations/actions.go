package operations

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// ActionQuery asks for a page of the operator actions, newest first.
type ActionQuery struct {
	// Since keeps the actions of the last Since.
	Since Span `json:"since,omitzero"`
	// Before pages on (the previous page's NextBefore).
	Before int64 `json:"before,omitzero"`
	Limit  int   `json:"limit,omitzero"`
}

// ActionPage is a page of operator actions.
type ActionPage struct {
	At      time.Time `json:"at"`
	Actions []Action  `json:"actions"`
	// NextBefore is the cursor of the next (older) page; null on the last.
	NextBefore *int64 `json:"next_before"`
}

// Actions reads a page of the operator actions in one snapshot.
func (s *Service) Actions(ctx context.Context, q ActionQuery) (*ActionPage, error) {
	n, err := limit(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.Before < 0 || q.Since < 0 {
		return nil, invalid("before must be an action's id, and since positive")
	}
	p := &ActionPage{}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		p.At = now
		var since time.Time
		if q.Since > 0 {
			since = now.Add(-q.Since.Duration())
		}
		acts, err := tx.OperatorActionListPage(ctx, since, q.Before, n+1)
		if err != nil {
			return err
		}
		acts, p.NextBefore = keyset(acts, n, func(a inbox.OperatorAction) int64 { return a.ID })
		p.Actions = actionsOf(acts)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// --- Replay ---

// ReplaySelection selects processed events to replay: one by its id, or
// by source, type, outcome, when they were processed and the criteria;
// All, explicitly, every one. An event an operator discarded or resolved
// is selected only by its id (ID, IDs) or its outcome: a replay by source
// or time does not run what someone decided must not run.
type ReplaySelection struct {
	ID     int64  `json:"id,omitzero"`
	Source string `json:"source,omitzero"`
	Type   string `json:"type,omitzero"`
	// Outcome is handled, unhandled, discarded or resolved ("" any of
	// the first two).
	Outcome string `json:"outcome,omitzero"`
	// Window bounds when they were processed.
	Window Window `json:"window,omitzero"`
	Criteria
	All bool `json:"all,omitzero"`
}

func (sel ReplaySelection) check() (ReplaySelection, error) {
	var err error
	if sel.ID < 0 {
		return sel, invalid("not an event's id: %d", sel.ID)
	}
	if err = sourceAndType(&sel.Source, &sel.Type); err != nil {
		return sel, err
	}
	switch inbox.Outcome(sel.Outcome) {
	case "", inbox.OutcomeHandled, inbox.OutcomeUnhandled, inbox.OutcomeDiscarded, inbox.OutcomeResolved:
	default:
		return sel, invalid("outcome must be %s, %s, %s or %s", inbox.OutcomeHandled, inbox.OutcomeUnhandled, inbox.OutcomeDiscarded, inbox.OutcomeResolved)
	}
	if sel.Criteria, err = sel.Criteria.check(); err != nil {
		return sel, err
	}
	return sel, sel.Window.check()
}

// IsZero reports a selection that names nothing (and is not All): every
// action refuses it.
func (sel ReplaySelection) IsZero() bool {
	return !sel.All && sel.ID == 0 && sel.Source == "" && sel.Type == "" && sel.Outcome == "" && sel.Window.IsZero() && sel.Criteria.IsZero()
}

func (sel ReplaySelection) filter(now time.Time) storage.ReplayFilter {
	from, to := sel.Window.Bounds(now)
	rfrom, rto := sel.Received.Bounds(now)
	return storage.ReplayFilter{ID: sel.ID, Source: sel.Source, EventType: sel.Type, Outcome: inbox.Outcome(sel.Outcome),
		ProcessedFrom: from, ProcessedTo: to, IDs: sel.IDs, Cause: sel.Cause, ErrorText: sel.Error,
		ReceivedFrom: rfrom, ReceivedTo: rto, All: sel.All}
}

// ReplayCursor is where a replay done in several calls stands.
type ReplayCursor = storage.ReplayCursor

// ReplayResult is what a replay call matched and did.
type ReplayResult struct {
	DryRun bool `json:"dry_run"`
	// Matched is what the selection counts (the first call: the whole
	// replay's); Replayed what this call reset; Archived the part of
	// Matched whose bodies the processor reads back from S3.
	Matched  int   `json:"matched"`
	Replayed int   `json:"replayed"`
	Archived int   `json:"archived"`
	ActionID int64 `json:"action_id"`
	// Next continues a replay this call did not finish; null when done.
	Next *ReplayCursor `json:"next"`
}

// Replay makes the selected processed events unprocessed and due at once,
// so that the processor applies them again with the handlers deployed
// now. A replay of more than Max events is done in several calls, each
// continuing the previous one (Next), all under one record.
func (s *Service) Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error) {
	sel, err := r.Select.check()
	if err != nil {
		return nil, err
	}
	if sel.IsZero() && r.Continue == nil {
		return nil, invalid(emptySelection)
	}
	if sel.ID > 0 {
		// One event asked for by its id: say why it cannot be replayed
		// when its body is gone, rather than count nothing. A selection of
		// many leaves such events out (EventCountReplay).
		if err := s.checkReplayable(ctx, sel.ID); err != nil {
			return nil, err
		}
	}
	res := &ReplayResult{DryRun: r.DryRun}
	if r.DryRun {
		if r.Continue != nil {
			return nil, invalid("a dry run counts the whole selection: it continues nothing")
		}
		err := s.read(ctx, func(tx *storage.Tx, now time.Time) error {
			dry, err := tx.EventReplay(ctx, sel.filter(now), storage.ReplayOptions{Now: now, DryRun: true})
			res.Matched, res.Archived = dry.Matched, dry.Archived
			return err
		})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	by, err := s.actor(ctx, r.Reason)
	if err != nil {
		return nil, err
	}
	now, err := s.deps.Store.PGNow(ctx)
	if err != nil {
		return nil, classify(err)
	}
	f := sel.filter(now)
	if r.Continue != nil {
		if err := s.checkContinuation(ctx, *r.Continue, f, by); err != nil {
			return nil, err
		}
	}
	max := r.Max
	if max <= 0 || max > ReplayPerCall {
		max = ReplayPerCall
	}
	out, err := s.deps.Store.EventReplay(ctx, f, storage.ReplayOptions{Now: now, By: by, Max: max, Continue: r.Continue, Expect: r.Expect})
	res.Matched, res.Replayed, res.Archived, res.ActionID, res.Next = out.Matched, out.Replayed, out.Archived, out.ActionID, out.Next
	if errors.Is(err, storage.ErrCountChanged) {
		return nil, countChanged(out.Matched, *r.Expect, "replay", "events")
	}
	if err != nil {
		return nil, classify(err)
	}
	s.log.Info("operations: events replayed", "operator", by.Name, "events", res.Replayed, "action_id", res.ActionID,
		"more", res.Next != nil, "event", sel.ID, "source", sel.Source, "event_type", sel.Type, "outcome", sel.Outcome, "all", sel.All)
	if res.Replayed > 0 {
		s.wake(ctx)
	}
	return res, nil
}

// checkReplayable refuses the replay of event id when the body retention
// removed its body (cause body_expired).
func (s *Service) checkReplayable(ctx context.Context, id int64) error {
	return s.read(ctx, func(tx *storage.Tx, _ time.Time) error {
		e, err := EventRef{ID: id}.get(ctx, tx)
		if inbox.CauseOf(err) == inbox.CauseEventNotFound {
			// No such event: the replay counts nothing, as before.
			return nil
		}
		if err != nil {
			return err
		}
		if e.BodyExpiredAt != nil && e.ExpungedAt == nil {
			return bodyExpired(e)
		}
		return nil
	})
}

// checkContinuation lets a replay go on only under its own record: a
// replay's, run by the same operator, with the same selection.
func (s *Service) checkContinuation(ctx context.Context, c ReplayCursor, f storage.ReplayFilter, by inbox.Actor) error {
	act, err := s.deps.Store.OperatorActionGetByID(ctx, c.ActionID)
	if errors.Is(err, storage.ErrActionNotFound) {
		return invalid("continue: no replay was recorded as action %d", c.ActionID)
	}
	if err != nil {
		return classify(err)
	}
	want, err := json.Marshal(f)
	if err != nil {
		return classify(err)
	}
	if act.Action != inbox.ActionReplay || act.Actor != by.Name || !sameJSON(act.Filter, want) {
		return invalid("continue: action %d is not this operator's replay of this selection", c.ActionID)
	}
	return nil
}

// sameJSON reports whether two JSON documents hold the same value (the
// record's column is jsonb, which reorders keys and spaces).
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// --- Expunge ---

// ExpungeRequest asks to erase one event's body everywhere, or only what
// that would erase.
type ExpungeRequest struct {
	Event  EventRef `json:"event"`
	DryRun bool     `json:"dry_run,omitzero"`
	Reason string   `json:"reason,omitzero"`
}

// ExpungeResult says what an expunge erases (DryRun) or erased, and what
// it cannot reach.
type ExpungeResult struct {
	DryRun          bool   `json:"dry_run"`
	ID              int64  `json:"id"`
	Source          string `json:"source"`
	EventID         string `json:"event_id"`
	AlreadyExpunged bool   `json:"already_expunged"`
	BodyInPostgres  bool   `json:"body_in_postgres"`
	PayloadStored   bool   `json:"payload_in_postgres"`
	// MetadataStored and LastErrorStored: the row's metadata and a last
	// error text, which may quote the body.
	MetadataStored  bool `json:"metadata_in_postgres"`
	LastErrorStored bool `json:"last_error_in_postgres"`
	// AttemptErrors counts the attempts whose error text is erased.
	AttemptErrors int     `json:"attempt_errors"`
	ArchiveKey    *string `json:"archive_key"`
	// DeadLetterCopies counts the dead letters holding a payload, a body
	// or an error text.
	DeadLetterCopies int `json:"dead_letter_copies"`
	// OrphanObjects and ObjectVersions: what the bucket held besides the
	// archive object's current version (known after the expunge only).
	OrphanObjects  []string   `json:"orphan_objects"`
	ObjectVersions int        `json:"object_versions_deleted"`
	ExpungedAt     *time.Time `json:"expunged_at"`
	// QuarantinedCopies counts the quarantined deliveries of the event's
	// source with its body, or with its event id as a kept header's value.
	QuarantinedCopies int `json:"quarantined_copies"`
	// NotReached lists the copies expunge cannot erase.
	NotReached []string `json:"not_reached"`
	// bodySHA256 finds the quarantined copies of the body.
	bodySHA256 []byte
}

// Expunge erases the raw body and payload of one event everywhere,
// irreversibly (archive.Expunge): the row stays, so a redelivery is still
// a duplicate. A dry run says what it would erase.
func (s *Service) Expunge(ctx context.Context, r ExpungeRequest) (*ExpungeResult, error) {
	ref, err := r.Event.check()
	if err != nil {
		return nil, err
	}
	var plan *ExpungeResult
	err = s.read(ctx, func(tx *storage.Tx, _ time.Time) error {
		e, err := ref.get(ctx, tx)
		if err != nil {
			return err
		}
		plan, err = expungePlan(ctx, tx, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	plan.DryRun = r.DryRun
	if r.DryRun {
		return plan, nil
	}
	by, err := s.actor(ctx, r.Reason)
	if err != nil {
		return nil, err
	}
	cfg, err := s.archiveConfig("an expunge (the bucket is searched for copies even of an event never archived)")
	if err != nil {
		return nil, err
	}
	a, err := s.archiver(cfg, nil)
	if err != nil {
		return nil, classify(err)
	}
	rep, err := a.Expunge(ctx, plan.Source, plan.EventID, by)
	if err != nil {
		return nil, inbox.WrapError(inbox.CauseOf(classify(err)), err, "the expunge did not finish; running it again is safe and finishes the job")
	}
	plan.AttemptErrors, plan.DeadLetterCopies = rep.AttemptErrors, rep.DeadLetters
	plan.MetadataStored, plan.LastErrorStored = rep.Metadata, rep.LastError
	plan.OrphanObjects, plan.ObjectVersions = append([]string{}, rep.Orphans...), rep.Versions
	// The quarantine is erased after the event: a failure here leaves the
	// expunge to run again, which finds the event done and erases these.
	if plan.QuarantinedCopies, err = s.deps.Store.QuarantineDeleteCopies(ctx, plan.Source, plan.EventID, plan.bodySHA256); err != nil {
		return nil, inbox.WrapError(inbox.CauseOf(classify(err)), err, "the expunge did not finish (the quarantine's copies); running it again is safe and finishes the job")
	}
	after, err := s.deps.Store.EventGetByID(ctx, plan.ID)
	if err != nil {
		return nil, classify(err)
	}
	plan.ExpungedAt = after.ExpungedAt
	s.log.Info("operations: event expunged", "operator", by.Name, "source", plan.Source, "event_id", plan.EventID,
		"attempt_errors", rep.AttemptErrors, "dead_letters", rep.DeadLetters, "quarantined_copies", plan.QuarantinedCopies, "orphans_deleted", len(rep.Orphans), "versions_deleted", rep.Versions)
	return plan, nil
}

// quarantineUnreached is what an expunge cannot match in the quarantine:
// it erases the copies of the event's source with its body, or with its
// event id as a kept header's value, and nothing of a delivery is
// trusted to say more.
const quarantineUnreached = "quarantined deliveries of the event with another body whose kind carries the event id in the body (Stripe, Square...): purge them with webhookctl quarantine purge"

// expungePlan reads what an expunge of e would erase in Postgres.
func expungePlan(ctx context.Context, tx storage.Executor, e *inbox.Event) (*ExpungeResult, error) {
	p := &ExpungeResult{
		ID: e.ID, Source: e.Source, EventID: e.EventID, AlreadyExpunged: e.ExpungedAt != nil,
		BodyInPostgres: e.Body != nil, PayloadStored: e.Payload != nil, ExpungedAt: e.ExpungedAt,
		MetadataStored: e.Metadata != nil, LastErrorStored: erasable(e.LastError),
		OrphanObjects: []string{}, NotReached: append(slices.Clone(archive.Unreachable), quarantineUnreached), bodySHA256: e.BodySHA256,
	}
	var err error
	if p.QuarantinedCopies, err = tx.QuarantineCountCopies(ctx, e.Source, e.EventID, e.BodySHA256); err != nil {
		return nil, err
	}
	if e.ExpungedAt == nil {
		p.ArchiveKey = orNull(e.ArchiveKey)
	}
	atts, err := tx.AttemptListByEvent(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range atts {
		if erasable(a.Error) {
			p.AttemptErrors++
		}
	}
	dls, err := tx.DeadLetterListByEvent(ctx, e.ID)
	if err != nil {
		return nil, err
	}
	for _, d := range deadLettersOf(dls) {
		if d.HoldsCopy {
			p.DeadLetterCopies++
		}
	}
	return p, nil
}

// --- Archive run ---

// ArchiveRunRequest asks for an archiver pass now, or only its count.
type ArchiveRunRequest struct {
	DryRun bool `json:"dry_run,omitzero"`
	// MinAge archives the events processed longer ago than this (0: the
	// archiver's ARCHIVE_MIN_AGE).
	MinAge Span `json:"min_age,omitzero"`
	// MaxBatches is the most objects this call writes (0 and anything
	// over ArchiveBatchesPerCall: ArchiveBatchesPerCall); Truncated says
	// when more is left, for the next call.
	MaxBatches int `json:"max_batches,omitzero"`
}

// ArchiveRunResult is what the pass found and did.
type ArchiveRunResult struct {
	DryRun        bool    `json:"dry_run"`
	MinAge        Span    `json:"min_age"`
	MinAgeSeconds float64 `json:"min_age_seconds"`
	// Archivable is what the pass found to archive when it started.
	Archivable  int64 `json:"archivable"`
	Events      int   `json:"events"`
	Objects     int   `json:"objects"`
	ObjectBytes int64 `json:"object_bytes"`
	BodyBytes   int64 `json:"body_bytes"`
	Swept       int   `json:"swept"`
	// ExpiredObjects and ExpiredEvents are what the body retention pass
	// removed (the archive's ARCHIVE_BODY_RETENTION_DAYS; none when unset).
	ExpiredObjects int      `json:"expired_objects"`
	ExpiredEvents  int      `json:"expired_events"`
	Truncated      bool     `json:"truncated"`
	Keys           []string `json:"keys"`
}

// ArchiveRun does what one invocation of the archiver function does, at
// most MaxBatches objects of it: the bodies of events processed more than
// MinAge ago go to S3, oldest first, the body retention pass runs (when
// the archive's settings have one), then orphan objects are swept. It is
// safe beside the deployed archiver: concurrent archivers take disjoint
// batches. A dry run counts what a pass would archive now.
func (s *Service) ArchiveRun(ctx context.Context, r ArchiveRunRequest) (*ArchiveRunResult, error) {
	if r.MinAge < 0 || r.MaxBatches < 0 {
		return nil, invalid("min_age and max_batches must not be negative")
	}
	cfg, err := s.archiveConfig("an archive run")
	if err != nil {
		return nil, err
	}
	if r.MinAge > 0 {
		cfg.MinAge = r.MinAge.Duration()
	}
	if cfg.MinAge <= 0 {
		cfg.MinAge = archive.DefaultMinAge
	}
	res := &ArchiveRunResult{DryRun: r.DryRun, MinAge: Span(cfg.MinAge), MinAgeSeconds: cfg.MinAge.Seconds(), Keys: []string{}}
	var now time.Time
	err = s.read(ctx, func(tx *storage.Tx, at time.Time) error {
		now = at
		var err error
		res.Archivable, err = tx.EventCountArchivable(ctx, now.Add(-cfg.MinAge))
		return err
	})
	if err != nil || r.DryRun {
		return res, err
	}
	if s.cfg.Access != AccessAct {
		return nil, inbox.Errorf(inbox.CauseReadOnly, "this operator API is read-only: it counts what a run would archive (a dry run) but does not run one")
	}
	op, _ := OperatorFrom(ctx)
	cfg.MaxBatches = r.MaxBatches
	if cfg.MaxBatches <= 0 || cfg.MaxBatches > ArchiveBatchesPerCall {
		cfg.MaxBatches = ArchiveBatchesPerCall
	}
	// Its clock is the database's, as the count above.
	a, err := s.archiver(cfg, stoppedClock(now))
	if err != nil {
		return nil, classify(err)
	}
	run, runErr := a.RunOnce(ctx)
	res.Events, res.Objects, res.ObjectBytes, res.BodyBytes = run.Events, run.Batches, run.ObjectBytes, run.BodyBytes
	res.Swept, res.Truncated = run.Swept, run.Truncated
	res.ExpiredObjects, res.ExpiredEvents = run.ExpiredObjects, run.ExpiredEvents
	if run.Keys != nil {
		res.Keys = run.Keys
	}
	s.log.Info("operations: archive run", "operator", op.Name, "events", res.Events, "objects", res.Objects, "truncated", res.Truncated)
	if runErr != nil {
		return res, inbox.WrapError(inbox.CauseOf(classify(runErr)), runErr,
			"the archive run failed after archiving some events (nothing of the failed batch was cleared; run it again)")
	}
	return res, nil
}
