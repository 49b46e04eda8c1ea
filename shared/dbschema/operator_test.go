package dbschema_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// The operator function's two roles: webhook_operator_read runs every read
// of the operator pages and is refused every write; webhook_operator runs
// the reads and the actions (requeue, replay, expunge, archive run). Both
// run here on an inbox with something on every page, seeded as the owner,
// and a versioned bucket, as the deployed archive is.

// operatorFixture is that inbox.
type operatorFixture struct {
	owner *pgxpool.Pool
	store *storage.Store // the owner's
	blobs *blobstore.Store
	// history is archived, with a past: it died (its attempts' errors
	// quote its body), was requeued (an operator action, a requeued dead
	// letter) and processed, then archived with three others. It has a
	// payload mismatch.
	history     *inbox.Event
	historyBody []byte
	// dead are open dead letters' events (stripe, invoice.payment_failed).
	dead []*inbox.Event
	// whole and calls are processed events of source replayme (types
	// whole and calls); due are processed stripe events an archive run
	// with a minimum age of an hour takes. All were processed 2 h ago.
	whole, calls, due []*inbox.Event
}

const (
	deadType     = "invoice.payment_failed"
	replaySource = "replayme"
)

var seeder = inbox.Actor{Name: "seed@test", Reason: "fixture"}

func setupOperator(t *testing.T) *operatorFixture {
	t.Helper()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	f := &operatorFixture{owner: owner, store: storage.New(owner)}
	srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
	f.blobs = s3test.Open(t, s3test.VersionedBucket(t, srv))

	// The history, first: ProcessDue processes everything due.
	f.historyBody = []byte(`{"id":"evt_op_history","type":"invoice.paid","email":"someone@example.com"}`)
	ago := func(d time.Duration) time.Time { return time.Now().Add(-d) }
	f.history = factory.Event(ctx, t, f.store, &factory.EventOpts{EventID: "evt_op_history", Type: "invoice.paid", Body: f.historyBody,
		State: inbox.StateDead, Now: ago(50 * time.Hour), LastError: "handler: bad email someone@example.com"})
	dls, err := f.store.DeadLetterListByEvent(ctx, f.history.ID)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters of the history = %v, %v", dls, err)
	}
	if n, err := f.store.DeadLetterRequeue(ctx, storage.DeadLetterFilter{ID: dls[0].ID}, storage.BulkOptions{Now: ago(49 * time.Hour), By: seeder}); err != nil || n.Done != 1 {
		t.Fatalf("requeue the history: %d, %v", n.Done, err)
	}
	factory.ProcessDue(ctx, t, f.store, ago(48*time.Hour))
	factory.Events(ctx, t, f.store, 3, &factory.EventOpts{State: inbox.StateProcessed, Now: ago(48 * time.Hour)})
	a, err := archive.New(archive.Config{Prefix: "archive", MinAge: 24 * time.Hour}, archive.Deps{Store: f.store, Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.RunOnce(ctx); err != nil || res.Events != 4 {
		t.Fatalf("seed archive run = %+v, %v", res, err)
	}
	if f.history, err = f.store.EventGetByID(ctx, f.history.ID); err != nil || f.history.ArchiveKey == "" {
		t.Fatalf("the history is not archived: %+v, %v", f.history, err)
	}
	stored := sha256.Sum256(f.historyBody)
	received := sha256.Sum256([]byte("another body"))
	if ok, err := f.store.PayloadMismatchInsert(ctx, inbox.PayloadMismatch{Source: "stripe", EventID: "evt_op_history",
		StoredSHA256: stored[:], ReceivedSHA256: received[:], ReceivedSize: 12}); err != nil || !ok {
		t.Fatalf("payload mismatch: %v %v", ok, err)
	}

	// The live inbox: one event in each unprocessed state (a paused one
	// included), dead letters,
	// processed events, a refusal.
	factory.Event(ctx, t, f.store, nil)
	factory.Event(ctx, t, f.store, &factory.EventOpts{State: inbox.StateRetrying})
	factory.Event(ctx, t, f.store, &factory.EventOpts{State: inbox.StateInFlight, ClaimedUntil: new(time.Now().Add(time.Hour))})
	factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "held", State: inbox.StatePaused})
	f.dead = factory.Events(ctx, t, f.store, 2, &factory.EventOpts{Type: deadType, State: inbox.StateDead, Now: ago(time.Hour)})
	processed := func(n int, source, typ string) []*inbox.Event {
		return factory.Events(ctx, t, f.store, n, &factory.EventOpts{Source: source, SourceKind: "stripe", Type: typ, State: inbox.StateProcessed, Now: ago(2 * time.Hour)})
	}
	f.whole, f.calls, f.due = processed(2, replaySource, "whole"), processed(5, replaySource, "calls"), processed(2, "stripe", "invoice.paid")
	factory.Rejection(ctx, t, f.store, &factory.RejectionOpts{})

	// More than a page of webhook_events (a single page has nothing to
	// estimate), and statistics for every table: the bloat estimate is
	// then known wherever the owner's is.
	factory.Events(ctx, t, f.store, 60, &factory.EventOpts{Source: "bulk", SourceKind: "stripe", Body: bytes.Repeat([]byte("x"), 500)})
	if _, err := owner.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	return f
}

// readBody reads an event's body as the operator's pages do: its row on
// store, then the archiver's Body.
func readBody(ctx context.Context, a *archive.Archiver, store *storage.Store, source, eventID string) ([]byte, error) {
	ev, err := store.EventGetByKey(ctx, source, eventID)
	if err != nil {
		return nil, err
	}
	return a.Body(ctx, ev)
}

// archiver is an archiver on store (a role's) and the fixture's bucket.
func (f *operatorFixture) archiver(t *testing.T, store *storage.Store, mod func(*archive.Config, *archive.Deps)) *archive.Archiver {
	t.Helper()
	cfg := archive.Config{Prefix: "archive", MinAge: time.Hour}
	deps := archive.Deps{Store: store, Blobs: f.blobs}
	if mod != nil {
		mod(&cfg, &deps)
	}
	a, err := archive.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// reads runs, as role in one read-only snapshot, every read the operator
// pages make (shared/operations), and checks each saw the fixture.
func (f *operatorFixture) reads(t *testing.T, role string) {
	t.Helper()
	ctx := t.Context()
	store := storage.New(pgtest.As(t, f.owner, role))
	tx, err := store.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	fail := func(what string, got any, err error) {
		t.Helper()
		t.Errorf("%s as %s: %+v, %v", what, role, got, err)
	}
	now, err := tx.PGNow(ctx)
	if err != nil {
		t.Fatalf("PGNow as %s: %v", role, err)
	}
	if who, err := tx.PGCurrentUser(ctx); err != nil || who != role {
		fail("PGCurrentUser", who, err)
	}
	hour := now.Add(-time.Hour)
	week := storage.Buckets{Since: now.Add(-7 * 24 * time.Hour), Until: now.Add(time.Minute), Width: time.Hour}

	// Stats: the backlog (live claims included), dead letters, refusals,
	// mismatches, the archive, charts, sizes and bloat.
	if b, err := tx.EventGetBacklogStats(ctx, now); err != nil {
		fail("EventGetBacklogStats", b, err)
	} else {
		field.Check(t, "EventGetBacklogStats as "+role,
			field.Eq("InFlight", b.InFlight, 1),
			field.Eq("Retrying", b.Retrying, 1),
			field.Is("Count", b.Count, b.Count >= 63, "at least 63"),
		)
	}
	if s, err := tx.DeadLetterGetOpenStats(ctx); err != nil || s.Open != 2 {
		fail("DeadLetterGetOpenStats", s, err)
	}
	if c, err := tx.DeadLetterCountByType(ctx); err != nil || len(c) != 1 {
		fail("DeadLetterCountByType", c, err)
	} else {
		field.Check(t, "DeadLetterCountByType as "+role,
			field.Eq("EventType", c[0].EventType, deadType),
			field.Eq("Count", c[0].Count, 2),
		)
	}
	if c, err := tx.RejectionCountByCause(ctx, hour); err != nil || len(c) != 1 {
		fail("RejectionCountByCause", c, err)
	}
	if r, err := tx.RejectionList(ctx, hour, 10); err != nil || len(r) != 1 {
		fail("RejectionList", r, err)
	}
	if b, err := tx.RejectionCountByBucket(ctx, week); err != nil || len(b) == 0 {
		fail("RejectionCountByBucket", b, err)
	}
	if b, err := tx.EventCountByBucket(ctx, week); err != nil || len(b) == 0 {
		fail("EventCountByBucket", b, err)
	}
	if b, err := tx.AttemptCountByBucket(ctx, week); err != nil || len(b) == 0 {
		fail("AttemptCountByBucket", b, err)
	}
	if s, err := tx.ArchiveObjectGetStats(ctx); err != nil || s.Objects != 1 || s.ArchivedEvents != 4 {
		fail("ArchiveObjectGetStats", s, err)
	}
	if p, err := tx.EventGetArchiveProgress(ctx, hour); err != nil || p.Due != 9 {
		fail("EventGetArchiveProgress", p, err)
	}
	if n, err := tx.EventCountArchivable(ctx, hour); err != nil || n != 9 {
		fail("EventCountArchivable", n, err)
	}
	if c, err := tx.PayloadMismatchCountBySource(ctx, hour); err != nil || len(c) != 1 {
		fail("PayloadMismatchCountBySource", c, err)
	}
	if s, err := tx.PGTableSizes(ctx); err != nil || len(s) < 9 {
		fail("PGTableSizes", s, err)
	}
	rels, err := tx.PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		t.Fatalf("PGBloatEstimate as %s: %v", role, err)
	}
	// The owner's estimate of each relation is known or unknown for the
	// same reason (a BRIN index is not estimated, ...): the role sees
	// every statistic the owner does.
	ownerRels, err := f.store.PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]storage.BloatUnknown{}
	for _, r := range ownerRels {
		want[r.Name] = r.Unknown
	}
	for _, r := range rels {
		if r.Unknown != want[r.Name] || r.Unknown == storage.BloatNoPrivilege || (r.Name == "webhook_events" && !r.Known()) {
			t.Errorf("bloat of %s as %s: %q, the owner's %q", r.Name, role, r.Unknown, want[r.Name])
		}
	}
	if len(rels) != len(ownerRels) {
		t.Errorf("bloat as %s: %d relations, the owner's %d", role, len(rels), len(ownerRels))
	}

	// Events: every state's list (each reads what its predicate needs,
	// claims included), find, detail.
	for _, st := range inbox.EventStates() {
		if evs, err := tx.EventList(ctx, storage.EventFilter{State: st}, now, 10); err != nil || (st != inbox.StateExpunged && len(evs) == 0) {
			fail("EventList "+string(st), len(evs), err)
		}
	}
	if evs, err := tx.EventList(ctx, storage.EventFilter{Source: "stripe", Outcome: inbox.OutcomeHandled, CreatedFrom: now.Add(-72 * time.Hour)}, now, 10); err != nil || len(evs) == 0 {
		fail("EventList by outcome", len(evs), err)
	}
	if evs, err := tx.EventListByEventID(ctx, "evt_op_history", 10); err != nil || len(evs) != 1 {
		fail("EventListByEventID", evs, err)
	}
	ev, err := tx.EventGetByKey(ctx, "stripe", "evt_op_history")
	if err != nil || ev.ID != f.history.ID {
		fail("EventGetByKey", ev, err)
	}
	if ev, err = tx.EventGetByID(ctx, f.history.ID); err != nil || ev.ArchiveKey == "" {
		fail("EventGetByID", ev, err)
	}
	if a, err := tx.AttemptListByEvent(ctx, f.history.ID); err != nil || len(a) != 4 {
		fail("AttemptListByEvent", a, err)
	}
	acts, err := tx.OperatorActionListByEvent(ctx, f.history.ID)
	if err != nil || len(acts) != 1 || acts[0].Action != inbox.ActionRequeue {
		fail("OperatorActionListByEvent", acts, err)
	}
	if d, err := tx.DeadLetterListByEvent(ctx, f.history.ID); err != nil || len(d) != 1 || d[0].RequeuedAt == nil {
		fail("DeadLetterListByEvent", d, err)
	}
	if m, err := tx.PayloadMismatchListByEvent(ctx, "stripe", "evt_op_history"); err != nil || len(m) != 1 {
		fail("PayloadMismatchListByEvent", m, err)
	}

	// Dead letters, actions, and the dry runs of the actions.
	if d, err := tx.DeadLetterListPage(ctx, storage.DeadLetterFilter{All: true}, 0, 10); err != nil || len(d) != 2 {
		fail("DeadLetterListPage", d, err)
	}
	if a, err := tx.OperatorActionListPage(ctx, time.Time{}, 0, 10); err != nil || len(a) != 1 {
		fail("OperatorActionListPage", a, err)
	}
	if a, err := tx.OperatorActionGetByID(ctx, acts[0].ID); err != nil || a.ID != acts[0].ID {
		fail("OperatorActionGetByID", a, err)
	}
	if n, err := tx.DeadLetterCountRequeueable(ctx, storage.DeadLetterFilter{EventType: deadType}); err != nil || n != 2 {
		fail("DeadLetterCountRequeueable", n, err)
	}
	if r, err := tx.EventReplay(ctx, storage.ReplayFilter{Source: replaySource}, storage.ReplayOptions{Now: now, DryRun: true}); err != nil || r.Matched != 7 {
		fail("EventReplay dry run", r, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// An archived body, read back from its object (the operator pages'
	// body view), and one still in Postgres.
	a := f.archiver(t, store, nil)
	if body, err := a.Body(ctx, ev); err != nil || !bytes.Equal(body, f.historyBody) {
		t.Errorf("archived body as %s: %q, %v", role, body, err)
	}
	if body, err := readBody(ctx, a, store, "stripe", f.due[0].EventID); err != nil || len(body) == 0 {
		t.Errorf("body in Postgres as %s: %q, %v", role, body, err)
	}
}

// insufficientPrivilege: err is PostgreSQL's refusal of a statement the
// role may not run.
func insufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// TestOperatorReadRunsAsItsRole: webhook_operator_read runs every read of
// the operator pages, archived bodies included, and every action is
// refused to it by the database (SQLSTATE 42501), whatever the function's
// code says, changing nothing.
func TestOperatorReadRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setupOperator(t)
	f.reads(t, migrate.RoleOperatorRead)

	// Outside a read-only transaction, so that the refusal is the role's,
	// not the transaction's.
	asRead := storage.New(pgtest.As(t, f.owner, migrate.RoleOperatorRead))
	now := time.Now()
	by := inbox.Actor{Name: "reader@test", Reason: "must not act"}
	if n, err := asRead.DeadLetterRequeue(ctx, storage.DeadLetterFilter{All: true}, storage.BulkOptions{Now: now, By: by}); !insufficientPrivilege(err) {
		t.Errorf("requeue as %s: %d, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, n.Done, err)
	}
	if r, err := asRead.EventReplay(ctx, storage.ReplayFilter{Source: replaySource}, storage.ReplayOptions{Now: now, By: by}); !insufficientPrivilege(err) {
		t.Errorf("replay as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, r, err)
	}
	cursor := &storage.ReplayCursor{ActionID: 1, After: 0, Through: f.calls[len(f.calls)-1].ID}
	if r, err := asRead.EventReplay(ctx, storage.ReplayFilter{Source: replaySource}, storage.ReplayOptions{Now: now, By: by, Max: 2, Continue: cursor}); !insufficientPrivilege(err) {
		t.Errorf("replay continued as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, r, err)
	}
	if r, err := asRead.DeadLetterResolve(ctx, storage.DeadLetterFilter{All: true}, storage.BulkOptions{Now: now, By: by}); !insufficientPrivilege(err) {
		t.Errorf("resolve as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, r, err)
	}
	if r, err := asRead.EventDiscard(ctx, storage.DiscardFilter{All: true}, storage.BulkOptions{Now: now, By: by}); !insufficientPrivilege(err) {
		t.Errorf("discard as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, r, err)
	}
	a := f.archiver(t, asRead, nil)
	if rep, err := a.Expunge(ctx, "stripe", "evt_op_history", by); !insufficientPrivilege(err) {
		t.Errorf("expunge as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, rep, err)
	}
	if res, err := a.RunOnce(ctx); !insufficientPrivilege(err) {
		t.Errorf("archive run as %s: %+v, %v; want SQLSTATE 42501", migrate.RoleOperatorRead, res, err)
	}

	// Nothing changed: the dead letters are open, the events processed,
	// the history's body in its object, one action recorded (the seed's).
	if s, err := f.store.DeadLetterGetOpenStats(ctx); err != nil || s.Open != 2 {
		t.Errorf("open dead letters after the refusals: %+v, %v", s, err)
	}
	if n, err := f.store.EventCountArchivable(ctx, now.Add(-time.Hour)); err != nil || n != 9 {
		t.Errorf("archivable after the refusals: %d, %v", n, err)
	}
	if body, err := readBody(ctx, f.archiver(t, f.store, nil), f.store, "stripe", "evt_op_history"); err != nil || !bytes.Equal(body, f.historyBody) {
		t.Errorf("the history's body after the refusals: %q, %v", body, err)
	}
	if acts, err := f.store.OperatorActionList(ctx, time.Time{}, 10); err != nil || len(acts) != 1 {
		t.Errorf("operator actions after the refusals: %+v, %v", acts, err)
	}
}

// TestOperatorRunsAsItsRole: webhook_operator runs the reads and every
// action: a requeue, a replay whole and one in bounded calls, a resolve, a
// discard in bounded calls, an expunge of
// an archived event (its object rewritten, its old version and an orphan
// holding it deleted), and an archive run (batches, the manifest's sweep
// and the bucket's, the bloat estimate of its line). Each action is
// recorded under the role.
func TestOperatorRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setupOperator(t)
	f.reads(t, migrate.RoleOperator)
	asOp := storage.New(pgtest.As(t, f.owner, migrate.RoleOperator))
	by := inbox.Actor{Name: "ops@test", Reason: "incident 7"}

	// A requeue, counted then done in one transaction, as the API does.
	tx, err := asOp.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	now, err := tx.PGNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dl := storage.DeadLetterFilter{EventType: deadType}
	if n, err := tx.DeadLetterCountRequeueable(ctx, dl); err != nil || n != 2 {
		t.Fatalf("count requeueable: %d, %v", n, err)
	}
	if n, err := tx.DeadLetterRequeue(ctx, dl, storage.BulkOptions{Now: now, By: by}); err != nil || n.Done != 2 {
		t.Fatalf("requeue: %d, %v", n.Done, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// A replay in one call.
	whole := storage.ReplayFilter{Source: replaySource, EventType: "whole"}
	if r, err := asOp.EventReplay(ctx, whole, storage.ReplayOptions{Now: now, By: by}); err != nil || r.Replayed != 2 || r.ActionID == 0 {
		t.Fatalf("replay: %+v, %v", r, err)
	}
	// A replay in calls of two, each continuing the last under its
	// record, as the API continues one (it reads the record first).
	calls := storage.ReplayFilter{Source: replaySource, EventType: "calls"}
	r, err := asOp.EventReplay(ctx, calls, storage.ReplayOptions{Now: now, By: by, Max: 2})
	if err != nil {
		t.Fatalf("replay's first call: %v", err)
	}
	if !field.Check(t, "replay's first call",
		field.Eq("Matched", r.Matched, 5),
		field.Eq("Replayed", r.Replayed, 2),
		field.Is("Next", r.Next, r.Next != nil, "set"),
	) {
		t.FailNow()
	}
	total := r.Replayed
	for next := r.Next; next != nil; next = r.Next {
		if act, err := asOp.OperatorActionGetByID(ctx, next.ActionID); err != nil || act.Action != inbox.ActionReplay {
			t.Fatalf("the replay's record: %+v, %v", act, err)
		}
		if r, err = asOp.EventReplay(ctx, calls, storage.ReplayOptions{Now: now, By: by, Max: 2, Continue: next}); err != nil {
			t.Fatalf("replay continued from %+v: %v", next, err)
		}
		total += r.Replayed
	}
	if total != 5 {
		t.Fatalf("the replay in calls reset %d events, want 5", total)
	}

	// A resolve and a discard, each in calls of one row under its record,
	// as the API does them.
	factory.Event(ctx, t, f.store, &factory.EventOpts{Source: "bulk", State: inbox.StateDead})
	factory.Events(ctx, t, f.store, 2, &factory.EventOpts{Source: "bulk", State: inbox.StateRetrying})
	rres, err := asOp.DeadLetterResolve(ctx, storage.DeadLetterFilter{Source: "bulk", Cause: string(inbox.CauseHandlerFailed)}, storage.BulkOptions{Now: now, By: by})
	if err != nil || rres.Done != 1 {
		t.Fatalf("resolve: %+v, %v", rres, err)
	}
	disc := storage.DiscardFilter{Source: "bulk", ErrorText: "factory"}
	dres, err := asOp.EventDiscard(ctx, disc, storage.BulkOptions{Now: now, By: by, Max: 1})
	if err != nil || dres.Done != 1 || dres.Next == nil {
		t.Fatalf("discard's first call: %+v, %v", dres, err)
	}
	if act, err := asOp.OperatorActionGetByID(ctx, dres.Next.ActionID); err != nil || act.Action != inbox.ActionDiscard {
		t.Fatalf("the discard's record: %+v, %v", act, err)
	}
	if dres, err = asOp.EventDiscard(ctx, disc, storage.BulkOptions{Now: now, By: by, Max: 1, Continue: dres.Next}); err != nil || dres.Done != 1 {
		t.Fatalf("discard continued: %+v, %v", dres, err)
	}

	// An expunge of the archived history, with an orphan object whose id
	// range holds it (an upload whose batch never committed): the object
	// rewritten, its old version and the orphan deleted for good.
	orphan := "archive/provider=stripe/dt=2026-01-02/" + itoa(f.history.ID) + "-" + itoa(f.history.ID) + ".jsonl.gz"
	if _, err := f.blobs.Put(ctx, orphan, []byte("orphan holding the body"), archive.ContentType); err != nil {
		t.Fatal(err)
	}
	rep, err := f.archiver(t, asOp, nil).Expunge(ctx, "stripe", "evt_op_history", by)
	if err != nil {
		t.Fatalf("expunge: %v", err)
	}
	if !field.Check(t, "expunge",
		field.Eq("ArchiveKey", rep.ArchiveKey, f.history.ArchiveKey),
		field.Eq("AttemptErrors", rep.AttemptErrors, 3),
		field.Eq("DeadLetters", rep.DeadLetters, 1),
		field.Is("Orphans", rep.Orphans, slices.Equal(rep.Orphans, []string{orphan}), "["+orphan+"]"),
		field.Is("Versions", rep.Versions, rep.Versions >= 2, "at least 2"),
	) {
		t.FailNow()
	}
	if _, err := readBody(ctx, f.archiver(t, f.store, nil), f.store, "stripe", "evt_op_history"); !errors.Is(err, archive.ErrExpunged) {
		t.Fatalf("the history after its expunge: %v", err)
	}

	// An archive run: the stripe events processed 2 h ago, a pending
	// manifest row no batch holds, and an upload no row names, both older
	// than the sweeps' guards (the run's clock is two hours ahead).
	if err := f.store.ArchiveObjectPrepare(ctx, "archive/orphan.jsonl.gz", "stripe"); err != nil {
		t.Fatal(err)
	}
	late := "archive/provider=stripe/dt=2026-01-02/900000-900001.jsonl.gz"
	if _, err := f.blobs.Put(ctx, late, []byte("late"), archive.ContentType); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	run := f.archiver(t, asOp, func(c *archive.Config, d *archive.Deps) {
		d.Clock = clockFunc(func() time.Time { return time.Now().Add(archive.DefaultOrphanMinAge + time.Hour) })
		c.MinAge = archive.DefaultOrphanMinAge + 2*time.Hour // the stripe events processed 2 h ago, not the replays' requeued
		d.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	res, err := run.RunOnce(ctx)
	if err != nil || res.Events != 2 || res.Swept != 2 {
		t.Fatalf("archive run: %+v, %v\n%s", res, err, logs.String())
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"`+archive.MetricTableBloat+`"`)) || bytes.Contains(logs.Bytes(), []byte("bloat_err")) {
		t.Fatalf("the run's bloat was not estimated:\n%s", logs.String())
	}

	// Every action is on record, under the role that ran it.
	acts, err := f.store.OperatorActionList(ctx, time.Time{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range acts {
		if a.Actor == by.Name {
			got = append(got, a.Action+":"+itoa(int64(a.Events))+":"+a.DBUser)
		}
	}
	want := []string{"expunge:1:webhook_operator", "discard:2:webhook_operator", "resolve:1:webhook_operator", "replay:5:webhook_operator",
		"replay:2:webhook_operator", "requeue:2:webhook_operator"}
	if !slices.Equal(got, want) {
		t.Fatalf("the actions' records (newest first) = %v, want %v", got, want)
	}
}

// TestOperatorRolesReadEveryCoreTable: both operator roles may read every
// core table (a new table the pages will show is granted, or this fails),
// and nothing else of the handlers'; the read role holds nothing but
// SELECT.
func TestOperatorRolesReadEveryCoreTable(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	rows, err := pool.Query(t.Context(), `SELECT relname::text FROM pg_class WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace AND relname LIKE 'webhook\_%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var core []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		core = append(core, n)
	}
	if rows.Err() != nil || len(core) < 9 {
		t.Fatalf("core tables %v, %v", core, rows.Err())
	}
	for _, role := range []string{migrate.RoleOperatorRead, migrate.RoleOperator} {
		var read []string
		for _, p := range held(t, pool, role) {
			if p.priv == "SELECT" && p.col == "" {
				read = append(read, p.rel)
			}
		}
		if !slices.Equal(read, core) {
			t.Errorf("%s reads %v, want every core table %v", role, read, core)
		}
	}
	for _, p := range held(t, pool, migrate.RoleOperatorRead) {
		if p.priv != "SELECT" || !strings.HasPrefix(p.rel, "webhook_") {
			t.Errorf("%s holds %+v", migrate.RoleOperatorRead, p)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
