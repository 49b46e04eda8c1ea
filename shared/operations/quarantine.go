package operations

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The quarantine: deliveries to a configured source that the receiver
// refused for their signature or their signed time, kept so that they can
// be verified again once the source's secrets are fixed (the receiver's
// quarantine.go says what is kept, and its bounds). A re-ingest verifies
// each against the source's current secrets, at the time it was received,
// and stores what now verifies exactly as the receiver would have; what
// still fails stays, with its new failure. Nothing unverified is ever
// stored as an event, so no handler ever sees it.

// ReingestPerCall is the most deliveries one Reingest takes: a source's
// whole quarantine at its default cap. A larger selection continues in
// further calls (ReingestResult.More).
const ReingestPerCall = storage.DefaultQuarantineCap

// reingestChunk is how many deliveries a re-ingest reads at once: at the
// default body limit, 16 MiB of bodies in memory at most.
const reingestChunk = 16

// QuarantineQuery asks for a page of the quarantine, newest first.
type QuarantineQuery struct {
	Source string `json:"source,omitzero"`
	// Window bounds when they were received.
	Window Window `json:"window,omitzero"`
	// Before pages on (the previous page's NextBefore).
	Before int64 `json:"before,omitzero"`
	Limit  int   `json:"limit,omitzero"`
}

// QuarantinePage is a page of quarantined deliveries.
type QuarantinePage struct {
	At         time.Time     `json:"at"`
	Deliveries []Quarantined `json:"deliveries"`
	// NextBefore is the cursor of the next (older) page; null on the last.
	NextBefore *int64 `json:"next_before"`
}

// Quarantined is one quarantined delivery as operators see it: nothing of
// it is authenticated.
type Quarantined struct {
	ID         int64       `json:"id"`
	Source     string      `json:"source"`
	SourceKind string      `json:"source_kind"`
	Cause      inbox.Cause `json:"cause"`
	RequestID  string      `json:"request_id"`
	ReceivedAt time.Time   `json:"received_at"`
	BodySize   int         `json:"body_size"`
	BodySHA256 string      `json:"body_sha256"`
	// TriedAt, LastCause and LastError: the last re-ingest that still
	// refused it; null before one.
	TriedAt   *time.Time `json:"tried_at"`
	LastCause *string    `json:"last_cause"`
	LastError *string    `json:"last_error"`
}

// QuarantinedDetail is one quarantined delivery whole: the headers kept
// with it and its body.
type QuarantinedDetail struct {
	Quarantined
	Headers map[string][]string `json:"headers"`
	// Body is the raw body (base64 in JSON), its first
	// QuarantineBodyShown bytes (BodyTruncated: there is more); a front
	// end prints it escaped.
	Body          []byte `json:"body"`
	BodyTruncated bool   `json:"body_truncated"`
}

// QuarantineBodyShown is the most of a quarantined body one answer
// carries: 4 MiB once base64-encoded, within a Lambda function URL's
// answer.
const QuarantineBodyShown = 3 << 20

func quarantinedOf(q inbox.Quarantined) Quarantined {
	return Quarantined{
		ID: q.ID, Source: q.Source, SourceKind: q.SourceKind, Cause: q.Cause, RequestID: q.RequestID, ReceivedAt: q.ReceivedAt,
		BodySize: q.BodySize, BodySHA256: hex.EncodeToString(q.BodySHA256), TriedAt: q.TriedAt,
		LastCause: orNull(string(q.LastCause)), LastError: orNull(q.LastError),
	}
}

// Quarantine reads a page of the quarantined deliveries in one snapshot.
func (s *Service) Quarantine(ctx context.Context, q QuarantineQuery) (*QuarantinePage, error) {
	n, err := limit(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.Source, err = text("source", q.Source); err != nil {
		return nil, err
	}
	if q.Before < 0 {
		return nil, invalid("before must be a quarantined delivery's id")
	}
	if err := q.Window.check(); err != nil {
		return nil, err
	}
	p := &QuarantinePage{Deliveries: []Quarantined{}}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		p.At = now
		from, to := q.Window.Bounds(now)
		rows, err := tx.QuarantineListPage(ctx, storage.QuarantineFilter{Source: q.Source, ReceivedFrom: from, ReceivedTo: to}, q.Before, n+1)
		if err != nil {
			return err
		}
		rows, p.NextBefore = keyset(rows, n, func(r inbox.Quarantined) int64 { return r.ID })
		for _, r := range rows {
			p.Deliveries = append(p.Deliveries, quarantinedOf(r))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// QuarantinedDelivery reads one quarantined delivery whole.
func (s *Service) QuarantinedDelivery(ctx context.Context, id int64) (*QuarantinedDetail, error) {
	if id <= 0 {
		return nil, invalid("not a quarantined delivery's id: %d", id)
	}
	var d *QuarantinedDetail
	err := s.read(ctx, func(tx *storage.Tx, _ time.Time) error {
		q, err := tx.QuarantineGetByID(ctx, id)
		if errors.Is(err, storage.ErrQuarantineNotFound) {
			return inbox.WrapError(inbox.CauseQuarantineNotFound, err, "no quarantined delivery has that id")
		}
		if err != nil {
			return err
		}
		d = &QuarantinedDetail{Quarantined: quarantinedOf(q), Headers: map[string][]string(q.Header), Body: q.Body}
		if len(d.Body) > QuarantineBodyShown {
			d.Body, d.BodyTruncated = d.Body[:QuarantineBodyShown], true
		}
		if d.Headers == nil {
			d.Headers = map[string][]string{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// QuarantineSelection selects quarantined deliveries: one by its id, or
// those of a source, received within a window; All, explicitly, every one
// (a re-ingest only: a purge names a delivery or a source).
type QuarantineSelection struct {
	ID     int64  `json:"id,omitzero"`
	Source string `json:"source,omitzero"`
	Window Window `json:"window,omitzero"`
	All    bool   `json:"all,omitzero"`
}

func (sel QuarantineSelection) check() (QuarantineSelection, error) {
	var err error
	if sel.ID < 0 {
		return sel, invalid("not a quarantined delivery's id: %d", sel.ID)
	}
	if sel.Source, err = text("source", sel.Source); err != nil {
		return sel, err
	}
	return sel, sel.Window.check()
}

// IsZero reports a selection that names nothing (and is not All): every
// action refuses it.
func (sel QuarantineSelection) IsZero() bool {
	return !sel.All && sel.ID == 0 && sel.Source == "" && sel.Window.IsZero()
}

func (sel QuarantineSelection) filter(now time.Time) storage.QuarantineFilter {
	from, to := sel.Window.Bounds(now)
	return storage.QuarantineFilter{ID: sel.ID, Source: sel.Source, ReceivedFrom: from, ReceivedTo: to}
}

// ReingestRequest asks to verify the selected deliveries again and store
// those that now verify, or only to count them.
type ReingestRequest struct {
	Select QuarantineSelection `json:"select"`
	// DryRun counts and changes nothing.
	DryRun bool `json:"dry_run,omitzero"`
	// Expect is the count the operator confirmed: when the selection now
	// counts otherwise, nothing is done (cause count_changed).
	Expect *int   `json:"expect,omitempty"`
	Reason string `json:"reason,omitzero"`
}

// ReingestResult is what a re-ingest matched and did.
type ReingestResult struct {
	DryRun bool `json:"dry_run"`
	// Matched is what the selection counts; the re-ingest took at most
	// ReingestPerCall of them (More: the rest wait for another call).
	Matched int  `json:"matched"`
	More    bool `json:"more"`
	// Stored: new events; Duplicates: already stored (a redelivery, or an
	// earlier re-ingest); both leave the quarantine. Refused: still
	// refused, kept with the new failure.
	Stored     int               `json:"stored"`
	Duplicates int               `json:"duplicates"`
	Refused    int               `json:"refused"`
	ActionID   int64             `json:"action_id"`
	Deliveries []ReingestOutcome `json:"deliveries"`
}

// ReingestOutcome is what became of one delivery.
type ReingestOutcome struct {
	ID     int64  `json:"id"`
	Source string `json:"source"`
	// Outcome is stored, duplicate, suspected_replay (its body is stored
	// under another id) or refused.
	Outcome string `json:"outcome"`
	// Event is the stored event's id, and EventID the sender's, once it
	// verified.
	Event   *int64  `json:"event"`
	EventID *string `json:"event_id"`
	// Cause and Error: why it is still refused.
	Cause *string `json:"cause"`
	Error *string `json:"error"`
}

// Outcomes of a re-ingested delivery.
const (
	ReingestStored          = "stored"
	ReingestDuplicate       = "duplicate"
	ReingestSuspectedReplay = "suspected_replay"
	ReingestRefused         = "refused"
)

// maxLastErrorBytes is the column's bound on a re-ingest's failure.
const maxLastErrorBytes = 512

// Reingest verifies the selected quarantined deliveries again, each
// against its source's secrets as the sources document now holds them and
// at the time it was received (a signed timestamp that was fine then is
// not refused for its age now), and stores each that verifies with the
// receiver's own insert: deduplicated on (source, event id), its kind,
// identity and metadata as the receiver stores them. Those leave the
// quarantine; the rest stay, with their new failure. It is one
// transaction, recorded with the events it stored, and it wakes the
// processor.
func (s *Service) Reingest(ctx context.Context, r ReingestRequest) (*ReingestResult, error) {
	sel, err := r.Select.check()
	if err != nil {
		return nil, err
	}
	if sel.IsZero() {
		return nil, invalid(emptySelection)
	}
	res := &ReingestResult{DryRun: r.DryRun, Deliveries: []ReingestOutcome{}}
	count := func(tx *storage.Tx, now time.Time) (int, error) {
		var err error
		res.Matched, err = tx.QuarantineCount(ctx, sel.filter(now))
		res.More = res.Matched > ReingestPerCall
		return res.Matched, err
	}
	by, err := s.actInTx(ctx, confirmed{dryRun: r.DryRun, expect: r.Expect, reason: r.Reason, what: "re-ingest", of: "deliveries"}, count,
		func(tx *storage.Tx, now time.Time, by inbox.Actor) error {
			// The sources as they are now, read once the count
			// holds and before anything is changed or locked.
			set, err := s.sources(ctx)
			if err != nil {
				return err
			}
			return reingest(ctx, tx, set, sel.filter(now), now, by, res)
		})
	if err != nil {
		return nil, err
	}
	if r.DryRun {
		return res, nil
	}
	s.log.Info("operations: quarantine re-ingested", "operator", by.Name, "action_id", res.ActionID, "stored", res.Stored,
		"duplicates", res.Duplicates, "refused", res.Refused, "more", res.More, "quarantined", sel.ID, "source", sel.Source, "all", sel.All)
	if res.Stored > 0 {
		s.wake(ctx)
	}
	return res, nil
}

// reingest verifies again, in tx, the deliveries f selects (at most
// ReingestPerCall, a few bodies at a time: each is up to the receiver's
// body limit), stores those that now verify, deletes them and the
// duplicates from the quarantine, and records the action with the events
// it stored; res gets each outcome.
func reingest(ctx context.Context, tx *storage.Tx, set *source.Set, f storage.QuarantineFilter, now time.Time, by inbox.Actor, res *ReingestResult) error {
	var done, stored []int64
	for after := int64(0); len(res.Deliveries) < ReingestPerCall; {
		rows, err := tx.QuarantineListForReingest(ctx, f, after, min(reingestChunk, ReingestPerCall-len(res.Deliveries)))
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		for _, q := range rows {
			after = q.ID
			out, eventPK, err := reingestOne(ctx, tx, set, q, now)
			if err != nil {
				return err
			}
			res.Deliveries = append(res.Deliveries, out)
			switch out.Outcome {
			case ReingestStored:
				res.Stored++
				stored = append(stored, eventPK)
				done = append(done, q.ID)
			case ReingestDuplicate, ReingestSuspectedReplay:
				res.Duplicates++
				done = append(done, q.ID)
			default:
				res.Refused++
			}
		}
	}
	if _, err := tx.QuarantineDelete(ctx, done); err != nil {
		return err
	}
	var err error
	res.ActionID, err = tx.OperatorActionRecord(ctx, inbox.ActionReingest, by, f, stored)
	return err
}

// reingestOne verifies q against set at its time of receipt and, when it
// verifies, stores it as the receiver would have; otherwise it records the
// failure on q. It returns the outcome and, for a stored event, its id.
func reingestOne(ctx context.Context, tx *storage.Tx, set *source.Set, q inbox.Quarantined, now time.Time) (ReingestOutcome, int64, error) {
	out := ReingestOutcome{ID: q.ID, Source: q.Source, Outcome: ReingestRefused}
	src, ok := set.Lookup(q.Source)
	var ident inbox.Identity
	verr := error(inbox.Errorf(inbox.CauseUnknownSource, "the source is no longer configured"))
	if ok {
		ident, verr = src.Verifier.Verify(http.Header(q.Header), q.Body, q.ReceivedAt)
	}
	if verr != nil {
		cause, msg := inbox.CauseOf(verr), clip(inbox.MessageOf(verr), maxLastErrorBytes)
		out.Cause, out.Error = orNull(string(cause)), orNull(msg)
		return out, 0, tx.QuarantineMarkFailed(ctx, q.ID, now, cause, msg)
	}
	res, err := tx.EventInsert(ctx, storage.EventInsertParams{
		Source: q.Source, SourceKind: src.Kind, EventID: ident.EventID, EventType: ident.EventType, Body: q.Body,
		Metadata: ident.Metadata, GuardBody: src.GuardBody,
	})
	if err != nil {
		return out, 0, err
	}
	out.Event, out.EventID = &res.ID, &ident.EventID
	switch {
	case res.Inserted:
		out.Outcome = ReingestStored
		return out, res.ID, nil
	case res.SuspectedReplay:
		out.Outcome = ReingestSuspectedReplay
	default:
		out.Outcome = ReingestDuplicate
	}
	return out, 0, nil
}

// clip cuts s to at most n bytes, on a character's boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// sources reads the sources document as it is now.
func (s *Service) sources(ctx context.Context) (*source.Set, error) {
	if s.deps.Sources == nil {
		return nil, inbox.Errorf(inbox.CauseSourcesNotConfigured,
			"a re-ingest verifies deliveries with the sources document (%s or %s, or the stack's copy), and none is given here", source.EnvSources, source.EnvSourcesFile)
	}
	set, err := s.deps.Sources(ctx)
	if err != nil {
		return nil, inbox.WrapError(inbox.CauseSourcesNotConfigured, err, "the sources document could not be read: nothing was changed")
	}
	return set, nil
}

// PurgeRequest asks to delete the selected quarantined deliveries, or
// only to count them.
type PurgeRequest struct {
	Select QuarantineSelection `json:"select"`
	DryRun bool                `json:"dry_run,omitzero"`
	Expect *int                `json:"expect,omitempty"`
	Reason string              `json:"reason,omitzero"`
}

// PurgeResult is how many deliveries a purge deleted (or would).
type PurgeResult struct {
	DryRun     bool  `json:"dry_run"`
	Deliveries int   `json:"deliveries"`
	ActionID   int64 `json:"action_id"`
}

// Purge deletes quarantined deliveries: one, or a source's (within a
// window, or all of them), in one transaction with its record.
func (s *Service) Purge(ctx context.Context, r PurgeRequest) (*PurgeResult, error) {
	sel, err := r.Select.check()
	if err != nil {
		return nil, err
	}
	if sel.ID == 0 && sel.Source == "" {
		return nil, invalid("a purge names a quarantined delivery or a source")
	}
	res := &PurgeResult{DryRun: r.DryRun}
	count := func(tx *storage.Tx, now time.Time) (int, error) {
		var err error
		res.Deliveries, err = tx.QuarantineCount(ctx, sel.filter(now))
		return res.Deliveries, err
	}
	by, err := s.actInTx(ctx, confirmed{dryRun: r.DryRun, expect: r.Expect, reason: r.Reason, what: "purge", of: "deliveries"}, count,
		func(tx *storage.Tx, now time.Time, by inbox.Actor) error {
			f := sel.filter(now)
			var err error
			if res.Deliveries, err = tx.QuarantinePurge(ctx, f); err != nil {
				return err
			}
			// The record's filter says how many were deleted: its events
			// count stored events, and a purge deletes none.
			res.ActionID, err = tx.OperatorActionRecord(ctx, inbox.ActionPurge, by, purgeRecord{f, res.Deliveries}, nil)
			return err
		})
	if err != nil {
		return nil, err
	}
	if r.DryRun {
		return res, nil
	}
	s.log.Info("operations: quarantine purged", "operator", by.Name, "action_id", res.ActionID, "deliveries", res.Deliveries,
		"quarantined", sel.ID, "source", sel.Source)
	return res, nil
}

// purgeRecord is a purge's selection as its record keeps it.
type purgeRecord struct {
	storage.QuarantineFilter
	Deleted int `json:"deleted"`
}
