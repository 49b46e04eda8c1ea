// Package archive moves the bodies of processed events out of Postgres into
// S3 and back: the archiver (RunOnce), the read back of any event's raw
// body wherever it is (Body), and the privacy erasure of one event
// everywhere (Expunge).
//
// The event row stays in Postgres for ever (provider, event_id, type,
// timestamps, body hash, archive location), so deduplication and audit keep
// working while the table sheds its largest columns.
//
// A batch is one S3 object: the events' lines as newline-delimited JSON,
// each line its own gzip member, so that the object is a valid .jsonl.gz
// and each event can be fetched alone with a ranged GET (see Line and
// docs/archiver.md).
//
// Never losing a payload rests on the order of operations, per batch:
//
//  1. Choose the batch: the oldest archivable events of one source that
//     no other archiver holds (SKIP LOCKED: concurrent archivers take
//     disjoint batches). Its key follows from its content.
//  2. Record the object in the manifest as pending (committed at once).
//  3. In a transaction, lock the manifest row and exactly the chosen events
//     (choosing again if another archiver took some meanwhile), and read
//     their bodies.
//  4. Upload the object (server-side encryption, a SHA-256 checksum S3
//     verifies), then confirm it with a HEAD (size and checksum).
//  5. In the same transaction, set the events' archive columns, clear their
//     payload and body, and mark the object committed; commit.
//
// A crash anywhere before 5 commits leaves every body in Postgres; the
// uploaded object, if any, is either overwritten by the re-run of the same
// batch (same content, same key) or, as a pending record no transaction
// holds, deleted by the next run's orphan sweep. S3 unavailable fails the
// run at step 4 with cause archive_store_unavailable and clears nothing.
//
// A batch uses one database connection at a time, so any number of
// archivers may share a pool without starving each other.
package archive

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// ErrExpunged is returned (wrapped) by Body for an expunged event.
var ErrExpunged = errors.New("event body expunged")

// errBodyExpired is wrapped by Body's error for an event whose body the
// retention pass removed.
var errBodyExpired = errors.New("event body past retention")

// ErrCorrupt is returned (wrapped) when archived bytes fail verification.
var ErrCorrupt = errors.New("archived body failed verification")

// Defaults of Config.
const (
	DefaultMinAge        = 7 * 24 * time.Hour
	DefaultBatchSize     = 1000
	DefaultMaxBatchBytes = 32 << 20
)

// What no deployment has reason to change, fixed here.
const (
	// reserve: RunOnce starts no batch when the context's deadline is
	// closer than this, so a Lambda ends its run instead of being killed
	// mid-batch (which is safe, but wasted work).
	reserve = 15 * time.Second
	// sweepLimit bounds the orphan objects one sweep removes.
	sweepLimit = 100
	// idleTimeout bounds how long a batch's transaction may sit idle (it
	// is idle while the object uploads). Past it Postgres ends the session
	// and so releases the batch's locks.
	idleTimeout = 5 * time.Minute
)

// Config configures an Archiver: settings only (ConfigFromEnv reads them);
// what the archiver works on is its Deps.
type Config struct {
	// Prefix is prepended to every key ("archive" gives archive/provider=...).
	Prefix string
	// MinAge: events processed less than this long ago stay in Postgres,
	// where handlers and replays read them cheaply. Default DefaultMinAge.
	MinAge time.Duration
	// BatchSize is the most events per object. Objects are what S3 bills
	// PUTs for: 1000 events per object is 1 PUT (and 1 HEAD) per 1000
	// events. Default DefaultBatchSize.
	BatchSize int
	// MaxBatchBytes bounds a batch's raw body bytes, which the archiver
	// holds in memory (compressed, plus one body at a time). Default
	// DefaultMaxBatchBytes.
	MaxBatchBytes int64
	// MaxBatches bounds the batches of one RunOnce; 0 means until no
	// archivable event is left (or the deadline is near).
	MaxBatches int
	// OrphanMinAge: the sweep of objects found by listing the bucket (not
	// named by the manifest) deletes only those stored longer ago than
	// this, by the clock, so never an upload whose commit may still be
	// pending. Default DefaultOrphanMinAge.
	OrphanMinAge time.Duration
	// BodyRetention, when set, is how long after receipt an event's body
	// is kept: each run's retention pass (retention.go) then deletes the
	// archive objects whose events are all older, and clears the bodies
	// of older processed events still in Postgres, keeping every row, its
	// dedup key and hash. Zero keeps bodies for ever.
	BodyRetention time.Duration
	// Metrics makes the run's summary line an EMF record (see
	// metrics.go); its zero value uses the default namespace, and Off
	// leaves the line a plain log line. Its clock is Deps.Clock.
	Metrics metrics.Emitter
}

// Clock is where the archiver reads the time: the age cutoff, the sweep's
// guards and the next run's arming. A dependency rather than time.Now, so
// that a caller (a test, the operator API with the database's clock) can
// run the archiver at the time it chooses.
type Clock interface {
	Now() time.Time
}

// Deps is what an Archiver works on and reports to.
type Deps struct {
	// Store and Blobs are Postgres and the S3 bucket. Required.
	Store *storage.Store
	Blobs *blobstore.Store
	// Logger gets one line per batch and one per run, the latter also the
	// run's metrics in CloudWatch embedded metric format. Nil discards.
	Logger *slog.Logger
	// Clock is the time the age cutoff and the sweep's guards are
	// computed from, and the metrics' timestamp. Nil is the system clock.
	Clock Clock
	// Wake, when set, arms the archiver's next run as an invocation ends
	// (Invocation): the deployed archiver runs on no schedule. Nil arms
	// nothing (the dev stack runs it every 30 s).
	Wake Armer
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Archiver archives, reads back and expunges event bodies. It is safe for
// concurrent use, and any number of archivers (processes or goroutines) may
// run at once on the same database and bucket.
type Archiver struct {
	cfg   Config
	deps  Deps
	store *storage.Store
	blobs *blobstore.Store
	log   *slog.Logger
	now   func() time.Time

	// afterConfirm, when set, runs after an upload is confirmed and before
	// the events are marked: tests crash or fail there. An error aborts the
	// batch as a crash would (rollback; the object stays as an orphan).
	afterConfirm func(ctx context.Context, key string) error
	// afterCommit, when set, runs after each batch commits.
	afterCommit func(ctx context.Context, key string)
	// afterChoose, when set, runs after a batch is chosen, before its
	// object is recorded: tests let another archiver run there.
	afterChoose func(ctx context.Context, key string)
	// noSweep makes RunOnce skip the orphan sweep, so that a test can leave
	// an orphan behind as a killed process would.
	noSweep bool
	// bloatThreshold is the threshold whose MinBytes the bloat gauges
	// count from: storage.DefaultBloatThreshold, which tests lower to
	// gauge tables of a few megabytes.
	bloatThreshold storage.BloatThreshold
}

// New checks cfg and deps, fills in defaults and returns an Archiver.
func New(cfg Config, deps Deps) (*Archiver, error) {
	if deps.Store == nil || deps.Blobs == nil {
		return nil, errors.New("archive: Store and Blobs are required")
	}
	if cfg.MinAge < 0 || cfg.BatchSize < 0 || cfg.MaxBatchBytes < 0 || cfg.MaxBatches < 0 || cfg.OrphanMinAge < 0 || cfg.BodyRetention < 0 {
		return nil, errors.New("archive: negative setting")
	}
	// Zero takes the default; negatives were refused above.
	cfg.MinAge = cmp.Or(cfg.MinAge, DefaultMinAge)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.MaxBatchBytes = cmp.Or(cfg.MaxBatchBytes, DefaultMaxBatchBytes)
	cfg.OrphanMinAge = cmp.Or(cfg.OrphanMinAge, DefaultOrphanMinAge)
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	cfg.Metrics.Now = deps.Clock.Now
	a := &Archiver{cfg: cfg, deps: deps, store: deps.Store, blobs: deps.Blobs, log: deps.Logger, now: deps.Clock.Now, bloatThreshold: storage.DefaultBloatThreshold}
	return a, nil
}

// Result sums up a run.
type Result struct {
	// Batches is the number of objects written (one per batch).
	Batches int
	// Events is the number of events archived.
	Events int
	// ObjectBytes is the compressed bytes uploaded; BodyBytes the raw body
	// bytes moved out of Postgres.
	ObjectBytes int64
	BodyBytes   int64
	// Keys are the objects written, in order.
	Keys []string
	// Swept is the number of orphan objects deleted.
	Swept int
	// ExpiredObjects and ExpiredEvents are what the retention pass did
	// (Config.BodyRetention): the objects it deleted, and the events whose
	// bodies it removed (from those objects or from their rows).
	ExpiredObjects int
	ExpiredEvents  int
	// Truncated is true when the run stopped with work possibly left: the
	// deadline was near, or MaxBatches was reached.
	Truncated bool
	// StoreUnavailable is true when the run failed because S3 was
	// unavailable (cause archive_store_unavailable).
	StoreUnavailable bool
}

// batch is one archived batch.
type batch struct {
	key         string
	events      int
	objectBytes int64
	bodyBytes   int64
}

// RunOnce archives batches of events processed more than MinAge ago, oldest
// first, until none is left, the deadline is near or MaxBatches is reached;
// then it sweeps orphan objects. It logs a summary and the run's metrics.
//
// An error leaves every event of the failed batch as it was; the batches
// committed before it stay archived (Result counts them).
func (a *Archiver) RunOnce(ctx context.Context) (Result, error) {
	start := time.Now()
	cutoff := a.now().Add(-a.cfg.MinAge)
	var res Result
	var runErr error
	var abandoned string // the key of a batch that failed after recording it
	for {
		if a.cfg.MaxBatches > 0 && res.Batches >= a.cfg.MaxBatches {
			res.Truncated = true
			break
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < reserve {
			res.Truncated = true
			break
		}
		b, err := a.archiveBatch(ctx, cutoff)
		if errors.Is(err, errContended) {
			res.Truncated = true
			break
		}
		if err != nil {
			runErr, abandoned = err, b.key
			break
		}
		if b.events == 0 {
			break
		}
		res.Batches++
		res.Events += b.events
		res.ObjectBytes += b.objectBytes
		res.BodyBytes += b.bodyBytes
		res.Keys = append(res.Keys, b.key)
	}
	// Archiving done, the retention pass, when configured: after the
	// batches, so that it never races this run's own uploads.
	if runErr == nil {
		exp, err := a.expireBodies(ctx)
		res.ExpiredObjects, res.ExpiredEvents = exp.objects, exp.events
		res.Truncated = res.Truncated || exp.truncated
		runErr = err
	}
	// A failed batch may have left an orphan: sweep, unless S3 is out.
	if !a.noSweep && inbox.CauseOf(runErr) != inbox.CauseArchiveStoreUnavailable {
		swept, err := a.sweepOrphans(ctx, abandoned)
		res.Swept = len(swept)
		if runErr == nil {
			runErr = err
		}
	}
	res.StoreUnavailable = runErr != nil && inbox.CauseOf(runErr) == inbox.CauseArchiveStoreUnavailable

	// With metrics off (make dev, where a person reads the log and no
	// alarm reads the zeros) a run that did nothing is a debug line; a
	// line the logger drops needs no bloat estimate either. Deployed,
	// every run's line is its metrics and is logged.
	level := slog.LevelInfo
	if a.cfg.Metrics.Off && runErr == nil && res.Events == 0 && res.Swept == 0 && res.ExpiredEvents == 0 && res.ExpiredObjects == 0 {
		level = slog.LevelDebug
	}
	if runErr == nil && !a.log.Enabled(ctx, level) {
		return res, nil
	}
	attrs := []any{
		"events", res.Events, "objects", res.Batches, "object_bytes", res.ObjectBytes, "body_bytes", res.BodyBytes,
		"swept", res.Swept, "expired_objects", res.ExpiredObjects, "expired_events", res.ExpiredEvents,
		"truncated", res.Truncated, "cutoff", cutoff,
		"duration_ms", time.Since(start).Milliseconds(),
	}
	gauges, bloatAttrs := a.bloatGauges(ctx)
	attrs = append(attrs, bloatAttrs...)
	attrs = append(attrs, a.metricAttrs(res, runErr, gauges...)...)
	switch {
	case runErr != nil && ctx.Err() != nil && errors.Is(runErr, context.Canceled):
		// Stopped on purpose (the dev stack's Ctrl-C, a SIGTERM): the
		// batch in flight was rolled back, which is no failure to page on.
		a.log.Warn("archive: run canceled", append(attrs, "err", runErr)...)
	case runErr != nil:
		a.log.Error("archive: run failed", append(attrs, "cause", string(inbox.CauseOf(runErr)), "err", runErr)...)
	default:
		a.log.Log(ctx, level, "archive: run done", attrs...)
	}
	return res, runErr
}

// archiveBatch archives one batch; zero events means nothing was left. It
// is the order of operations the package comment promises, step by step.
func (a *Archiver) archiveBatch(ctx context.Context, cutoff time.Time) (batch, error) {
	tx, key, events, err := a.lockBatch(ctx, cutoff)
	if err != nil || tx == nil {
		return batch{}, err
	}
	// After Commit this does nothing; on any early return it releases the
	// rows with their payloads untouched.
	defer tx.Rollback(context.WithoutCancel(ctx))

	ob := newObjectBuilder()
	var bodyBytes int64
	for _, e := range events {
		if err := ob.add(e); err != nil {
			return batch{key: key}, inbox.WrapError(inbox.CauseInternal, err, "build archive object")
		}
		bodyBytes += int64(len(e.Body))
	}
	data := ob.buf.Bytes()
	sum := sha256.Sum256(data)
	obj := inbox.ArchiveObject{Key: key, Source: events[0].Source, EventCount: len(events), Size: int64(len(data)), SHA256: sum[:]}
	// The span the retention pass judges the object by: it is deleted
	// only once its newest event is past retention.
	obj.FirstID, obj.LastID, obj.LastReceivedAt = events[0].ID, events[0].ID, &events[0].CreatedAt
	for _, e := range events[1:] {
		obj.FirstID, obj.LastID = min(obj.FirstID, e.ID), max(obj.LastID, e.ID)
		if e.CreatedAt.After(*obj.LastReceivedAt) {
			obj.LastReceivedAt = &e.CreatedAt
		}
	}
	log := a.log.With("key", key, "source", obj.Source, "events", obj.EventCount)

	if _, err := a.blobs.Put(ctx, key, data, ContentType); err != nil {
		log.Warn("archive: upload failed; nothing cleared", "cause", string(storeCause(err)), "err", err)
		return batch{key: key}, storeError(err, "upload archive object")
	}
	if err := a.confirm(ctx, key, sum[:], int64(len(data))); err != nil {
		log.Warn("archive: upload not confirmed; nothing cleared", "cause", string(inbox.CauseOf(err)), "err", err)
		return batch{key: key}, err
	}
	if a.afterConfirm != nil {
		if err := a.afterConfirm(ctx, key); err != nil {
			return batch{key: key}, err
		}
	}
	if err := tx.EventMarkArchived(ctx, key, ob.locs); err != nil {
		return batch{key: key}, dbError(err, "mark events archived")
	}
	if err := tx.ArchiveObjectCommit(ctx, obj); err != nil {
		return batch{key: key}, dbError(err, "commit archive object")
	}
	if err := tx.Commit(ctx); err != nil {
		return batch{key: key}, dbError(err, "commit archive batch")
	}
	log.Info("archive: batch archived", "object_bytes", len(data), "body_bytes", bodyBytes)
	if a.afterCommit != nil {
		a.afterCommit(ctx, key)
	}
	return batch{key: key, events: len(events), objectBytes: int64(len(data)), bodyBytes: bodyBytes}, nil
}

// lockBatchAttempts bounds how often lockBatch chooses again when another
// archiver (or a sweep) changed the batch between choosing and locking: a
// few times in a row at most, even with many archivers.
const lockBatchAttempts = 10

// errBatchChanged says that a chosen batch could not be locked as chosen:
// another archiver took some of its events, or a sweep its pending row.
var errBatchChanged = errors.New("archive batch changed since it was chosen")

// errContended: every one of lockBatchAttempts choices in a row was taken
// by other archivers before it could be locked. It is contention, not a
// failure: the run ends as truncated, and the next one goes on.
var errContended = errors.New("archive batches kept being taken by other archivers")

// lockBatch chooses the next batch, records its object as pending in the
// manifest, and opens the batch's transaction holding both, with the
// events read. A nil transaction means no event is left to archive.
//
// Choosing first (a statement of its own) and locking later lets the
// pending row be recorded between the two with no transaction open: a batch
// never needs two connections at once, so archivers sharing a pool cannot
// starve each other of connections.
func (a *Archiver) lockBatch(ctx context.Context, cutoff time.Time) (*storage.Tx, string, []*inbox.Event, error) {
	params := storage.EventArchiveParams{ProcessedBefore: cutoff, Limit: a.cfg.BatchSize, MaxBytes: a.cfg.MaxBatchBytes}
	for attempt := 1; ; attempt++ {
		c, err := a.store.EventListArchiveCandidates(ctx, params)
		if err != nil {
			return nil, "", nil, dbError(err, "choose a batch to archive")
		}
		if len(c.IDs) == 0 {
			return nil, "", nil, nil
		}
		key := a.objectKey(c)
		if a.afterChoose != nil {
			a.afterChoose(ctx, key)
		}
		err = a.store.ArchiveObjectPrepare(ctx, key, c.Source)
		switch {
		case errors.Is(err, storage.ErrArchiveObjectCommitted) && attempt < lockBatchAttempts:
			// Another archiver chose the same batch and committed it
			// between our choice and now: its events are archived, and the
			// next choice leaves them out.
			a.log.Debug("archive: batch committed by another archiver; choosing again", "key", key)
			continue
		case errors.Is(err, storage.ErrArchiveObjectCommitted):
			// Chosen again and again with a committed key: keys are unique
			// per batch content, so this is a bug, and the committed object
			// must not be overwritten.
			return nil, "", nil, inbox.WrapError(inbox.CauseInternal, err, "archive key collision")
		case err != nil:
			return nil, "", nil, dbError(err, "record archive object")
		}
		tx, events, err := a.beginBatch(ctx, key, c)
		if errors.Is(err, errBatchChanged) && attempt < lockBatchAttempts {
			a.log.Debug("archive: batch changed before it was locked; choosing again", "key", key, "err", err)
			continue
		}
		if errors.Is(err, errBatchChanged) {
			a.log.Info("archive: other archivers took every batch chosen; ending the run, the next one goes on", "attempts", attempt)
			return nil, "", nil, errContended
		}
		if err != nil {
			return nil, "", nil, dbError(err, "lock archive batch")
		}
		return tx, key, events, nil
	}
}

// beginBatch opens the batch's transaction: it locks the pending manifest
// row of key, so that no sweep takes it, and exactly the events of c (the
// archivable conditions again: between choosing and locking, an event may
// have been archived by another archiver, or expunged), and reads them.
// The transaction's idle timeout ends it should the archiver hang or its
// Lambda be frozen mid-upload: the batch is then simply redone.
func (a *Archiver) beginBatch(ctx context.Context, key string, c storage.ArchiveCandidates) (*storage.Tx, []*inbox.Event, error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*storage.Tx, []*inbox.Event, error) {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("lock archive batch %s: %w", key, err)
	}
	if err := tx.PGSetIdleInTransactionTimeout(ctx, idleTimeout); err != nil {
		return fail(err)
	}
	ok, err := tx.ArchiveObjectLockPending(ctx, key)
	switch {
	case err != nil:
		return fail(err)
	case !ok:
		return fail(fmt.Errorf("pending manifest row gone: %w", errBatchChanged))
	}
	events, err := tx.EventLockForArchive(ctx, c.IDs)
	switch {
	case err != nil:
		return fail(err)
	case len(events) != len(c.IDs):
		return fail(fmt.Errorf("%d of %d events still archivable and free: %w", len(events), len(c.IDs), errBatchChanged))
	}
	return tx, events, nil
}

// confirm checks with a HEAD that the object is stored with the expected
// size and, when S3 reports one, checksum. The PUT's own checksum already
// made S3 verify the bytes; the HEAD also proves the object is readable
// under its key before anything is cleared, for a fraction of a PUT's price.
func (a *Archiver) confirm(ctx context.Context, key string, sum []byte, size int64) error {
	head, err := a.blobs.Head(ctx, key)
	if err != nil {
		return storeError(err, "confirm archive object")
	}
	if head.Size != size || (head.SHA256 != nil && !bytes.Equal(head.SHA256, sum)) {
		return inbox.WrapError(inbox.CauseArchiveStoreFailed,
			fmt.Errorf("object %s: stored %d bytes sha256 %x, uploaded %d bytes sha256 %x", key, head.Size, head.SHA256, size, sum),
			"archive object not stored as uploaded")
	}
	return nil
}

// objectKey names a batch's object from its content alone, so that a re-run
// of the same batch after a crash writes the same key (replacing the object
// rather than leaving a second copy):
//
//	[prefix/]provider=<provider>/dt=<YYYY-MM-DD>/<min id>-<max id>.jsonl.gz
//
// dt is the UTC date the batch's earliest event was received. provider= and
// dt= are Hive-style partitions, which Athena can project. Two batches never
// share a key: a committed batch's events are archived, so no later batch
// contains its lowest id.
func (a *Archiver) objectKey(c storage.ArchiveCandidates) string {
	lo, hi := c.IDs[0], c.IDs[0]
	for _, id := range c.IDs[1:] {
		lo, hi = min(lo, id), max(hi, id)
	}
	key := fmt.Sprintf("provider=%s/dt=%s/%d-%d.jsonl.gz", c.Source, c.FirstCreatedAt.UTC().Format(time.DateOnly), lo, hi)
	if a.cfg.Prefix != "" {
		key = a.cfg.Prefix + "/" + key
	}
	return key
}

// sweepOrphans deletes objects whose batch never committed and returns
// their keys, at most sweepLimit, in two passes:
//
//   - The manifest's: an orphan is a pending manifest row no transaction
//     holds, recorded more than DefaultPendingGrace ago (a younger one may be a
//     live batch's, between recording and locking it). It is locked (so two sweeps never take the same one, and no
//     batch can lock it meanwhile), its object deleted, then its row, and
//     the transaction committed; a delete that fails stops the sweep and
//     leaves the row for the next one.
//   - The bucket's: objects found by listing the archive's prefix that no
//     committed batch owns and that are older than OrphanMinAge, each
//     deleted under its (recorded, then locked) manifest row. An upload
//     that lands after its batch died and its pending row was swept is
//     named by no row: only this pass finds it.
//
// In a versioned bucket a delete leaves a delete marker, and the bytes
// stay as a noncurrent version until the bucket's lifecycle expires them
// (the archiver may not delete versions). RunOnce calls it.
//
// It first removes the object of the batch this archiver abandoned in its
// run (abandoned, "" for none): its own orphan for sure, so at once, where
// another archiver's pending row waits out DefaultPendingGrace.
func (a *Archiver) sweepOrphans(ctx context.Context, abandoned string) ([]string, error) {
	var swept []string
	if abandoned != "" {
		ok, err := a.sweepAbandoned(ctx, abandoned)
		if err != nil {
			return nil, err
		}
		if ok {
			swept = append(swept, abandoned)
		}
	}
	for len(swept) < sweepLimit {
		key, err := a.sweepOne(ctx)
		if err != nil {
			return swept, err
		}
		if key == "" {
			break
		}
		swept = append(swept, key)
	}
	listed, err := a.sweepListed(ctx, sweepLimit-len(swept))
	return append(swept, listed...), err
}

// sweepAbandoned removes the object and the pending row of key, a batch
// this archiver abandoned; false when another archiver holds the row (it
// chose the same batch and may still commit it) or it is gone.
func (a *Archiver) sweepAbandoned(ctx context.Context, key string) (bool, error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return false, dbError(err, "sweep abandoned archive object")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	ok, err := tx.ArchiveObjectLockAbandoned(ctx, key)
	if err != nil || !ok {
		return false, dbErrorOrNil(err, "sweep abandoned archive object")
	}
	if err := a.blobs.Delete(ctx, key); err != nil {
		return false, storeError(err, "delete abandoned archive object")
	}
	if err := tx.ArchiveObjectDelete(ctx, key); err != nil {
		return false, dbError(err, "sweep abandoned archive object")
	}
	if err := tx.Commit(ctx); err != nil {
		return false, dbError(err, "sweep abandoned archive object")
	}
	a.log.Info("archive: abandoned batch's object deleted", "key", key)
	return true, nil
}

// sweepOne removes the oldest orphan; "" when there is none.
func (a *Archiver) sweepOne(ctx context.Context) (string, error) {
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return "", dbError(err, "sweep orphan archive objects")
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	key, ok, err := tx.ArchiveObjectLockOrphan(ctx, a.now().Add(-DefaultPendingGrace))
	if err != nil || !ok {
		return "", dbErrorOrNil(err, "sweep orphan archive objects")
	}
	if err := a.blobs.Delete(ctx, key); err != nil {
		return "", storeError(err, "delete orphan archive object")
	}
	if err := tx.ArchiveObjectDelete(ctx, key); err != nil {
		return "", dbError(err, "sweep orphan archive objects")
	}
	if err := tx.Commit(ctx); err != nil {
		return "", dbError(err, "sweep orphan archive objects")
	}
	a.log.Info("archive: orphan object deleted", "key", key)
	return key, nil
}

func storeCause(err error) inbox.Cause {
	if blobstore.IsUnavailable(err) {
		return inbox.CauseArchiveStoreUnavailable
	}
	return inbox.CauseArchiveStoreFailed
}

func storeError(err error, message string) error {
	return inbox.WrapError(storeCause(err), err, message)
}

func dbError(err error, message string) error {
	return inbox.WrapError(inbox.CauseDatabaseUnavailable, err, message)
}

func dbErrorOrNil(err error, message string) error {
	if err == nil {
		return nil
	}
	return dbError(err, message)
}
