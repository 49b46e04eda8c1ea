package operations_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/locals3"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a database of its own with an acting and a read-only
// Service over it, and a context whose operator is alice.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *storage.Store
	act   *operations.Service
	read  *operations.Service
	arch  *archive.Config
	blobs *blobstore.Store
}

// setup makes the fixture; withArchive adds a real S3 bucket (versioned,
// as the stack's is) for archived bodies, expunges and archive runs.
func setup(t *testing.T, withArchive bool) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	f := &fixture{t: t, pool: pool, store: store, ctx: operations.WithOperator(t.Context(), operations.Operator{Name: "alice@ops"})}
	if withArchive {
		srv := s3test.ServerWith(t, locals3.Options{Versioning: true})
		f.arch = &archive.Config{Prefix: "archive", MinAge: time.Minute, BatchSize: 2}
		f.blobs = s3test.Open(t, s3test.VersionedBucket(t, srv))
	}
	deps := operations.Deps{Store: store, Blobs: f.blobs}
	var err error
	if f.act, err = operations.New(operations.Config{Access: operations.AccessAct, Archive: f.arch}, deps); err != nil {
		t.Fatal(err)
	}
	if f.read, err = operations.New(operations.Config{Access: operations.AccessRead, Archive: f.arch}, deps); err != nil {
		t.Fatal(err)
	}
	return f
}

// cause fails the test unless err has the cause.
func cause(t *testing.T, err error, want inbox.Cause) {
	t.Helper()
	if got := inbox.CauseOf(err); err == nil || got != want {
		t.Fatalf("error %v has cause %s, want %s", err, got, want)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestNewRefusesAnAccessItDoesNotKnow(t *testing.T) {
	t.Parallel()
	store := storage.New(pgtest.Pool(t))
	if _, err := operations.New(operations.Config{}, operations.Deps{Store: store}); err == nil {
		t.Fatal("a Service without an access was made")
	}
	if _, err := operations.New(operations.Config{Access: "admin"}, operations.Deps{Store: store}); err == nil {
		t.Fatal("a Service with access admin was made")
	}
	if _, err := operations.New(operations.Config{Access: operations.AccessRead}, operations.Deps{}); err == nil {
		t.Fatal("a Service without a store was made")
	}
}

// ConfigFromEnv fails closed: without OPERATOR_ACCESS the Service may only
// read; with ARCHIVE_BUCKET it reads the archive's settings, whose
// problems are each said once (ARCHIVE_MIN_AGE is read twice).
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := operations.ConfigFromEnv(env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Access != operations.AccessRead {
		t.Errorf("default Access = %q, want %q", cfg.Access, operations.AccessRead)
	}
	if cfg.Archive != nil {
		t.Errorf("an archive is configured without ARCHIVE_BUCKET: %+v", *cfg.Archive)
	}
	get := env(map[string]string{operations.EnvAccess: "act", "ARCHIVE_BUCKET": "b", "ARCHIVE_PREFIX": "archive", "ARCHIVE_MIN_AGE": "3d"})
	cfg, err = operations.ConfigFromEnv(get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Access != operations.AccessAct {
		t.Errorf("Access = %q, want %q", cfg.Access, operations.AccessAct)
	}
	if !operations.ArchiveConfigured(get) {
		t.Error("ARCHIVE_BUCKET is set, but the archive is not configured")
	}
	if cfg.Archive == nil {
		t.Fatal("ARCHIVE_BUCKET is set, but Archive is nil")
	}
	if cfg.Archive.MinAge != 72*time.Hour {
		t.Errorf("Archive.MinAge = %v, want 72h", cfg.Archive.MinAge)
	}
	_, err = operations.ConfigFromEnv(env(map[string]string{operations.EnvAccess: "admin", "ARCHIVE_BUCKET": "b", "ARCHIVE_MIN_AGE": "soon"}))
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	msg := err.Error()
	for _, want := range []string{operations.EnvAccess, "ARCHIVE_MIN_AGE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %s:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "ARCHIVE_MIN_AGE") != 1 {
		t.Errorf("ARCHIVE_MIN_AGE's problem is said more than once:\n%s", msg)
	}
}

func TestWhoami(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	id := must[*operations.Identity](t)(f.read.Whoami(f.ctx))
	field.Must(t, "whoami", field.Printed("Operator", id.Operator, "alice@ops"), field.Printed("Verified", id.Verified, false),
		field.Printed("Access", id.Access, operations.AccessRead), field.Printed("DatabaseRole given", id.DatabaseRole != "", true))
	ctx := operations.WithOperator(t.Context(), operations.Operator{Name: "arn:aws:sts::1:assumed-role/Ops/bob", Verified: true})
	if id := must[*operations.Identity](t)(f.act.Whoami(ctx)); !id.Verified || id.Access != operations.AccessAct {
		t.Fatalf("whoami = %+v", id)
	}
}

// Stats reads every part in one snapshot: the backlog, the open dead
// letters, the window's refusals and mismatches, the archive's progress,
// the charts' buckets (their sums match the counts) and the tables.
func TestStats(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	now := time.Now()
	factory.Events(f.ctx, t, f.store, 3, &factory.EventOpts{Type: "a"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{State: inbox.StateRetrying, LastError: "boom"})
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "github", Type: "push", State: inbox.StateDead})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{State: inbox.StateProcessed, ProcessedAt: new(now.Add(-2 * time.Hour))})
	for range 3 {
		factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	}

	st := must[*operations.Stats](t)(f.read.Stats(f.ctx, operations.StatsQuery{Window: operations.Span(time.Hour), Charts: true, Storage: true}))
	if st.Backlog.Unprocessed != 4 || st.Backlog.Retrying != 1 || st.Backlog.OldestReceivedAt == nil {
		t.Errorf("backlog = %+v", st.Backlog)
	}
	if len(st.DeadLetters) != 1 {
		t.Fatalf("dead letters by source = %+v, want github's alone", st.DeadLetters)
	}
	field.Must(t, "dead letters", field.Printed("DeadLettersOpen", st.DeadLettersOpen, 2), field.Printed("DeadLetters[0].Source", st.DeadLetters[0].Source, "github"),
		field.Printed("OldestDeadAt given", st.OldestDeadAt != nil, true))
	if st.RejectionsTotal != 3 || len(st.Rejections) != 1 || st.Rejections[0].Cause != inbox.CauseSignatureMismatch {
		t.Errorf("rejections = %d %+v", st.RejectionsTotal, st.Rejections)
	}
	// Processed two hours ago: waiting, but not due under the default
	// minimum age of 7 days.
	if st.Archive.Waiting != 1 || st.Archive.Due != 0 || st.Archive.MinAge != operations.Span(archive.DefaultMinAge) {
		t.Errorf("archive = %+v", st.Archive)
	}
	if st.Window.String() != "1h" || st.WindowSeconds != 3600 {
		t.Errorf("window = %s %v", st.Window, st.WindowSeconds)
	}
	c := st.Charts
	if c == nil {
		t.Fatal("no charts")
	}
	field.Must(t, "charts", field.Printed("Width()", c.Width(), 2*time.Minute), field.Printed("len(Accepted)", len(c.Accepted), 30),
		field.Printed("len(Processed)", len(c.Processed), 30), field.Printed("len(Refused)", len(c.Refused), 1))
	var accepted, refused int64
	for i := range c.Accepted {
		accepted += c.Accepted[i]
		refused += c.Refused[0].Values[i]
	}
	if accepted != 7 || refused != 3 {
		t.Errorf("the charts count %d accepted and %d refused, want 7 and 3", accepted, refused)
	}
	if len(st.Tables) == 0 || st.Bloat == nil || len(st.Bloat.Relations) == 0 {
		t.Errorf("storage = %+v %+v", st.Tables, st.Bloat)
	}
	// Without Charts or Storage, those parts are left out.
	if lean := must[*operations.Stats](t)(f.read.Stats(f.ctx, operations.StatsQuery{})); lean.Charts != nil || lean.Tables != nil || lean.Window != operations.DefaultWindow {
		t.Errorf("a plain stats = %+v", lean)
	}
	_, err := f.read.Stats(f.ctx, operations.StatsQuery{Window: operations.MaxWindow + 1})
	cause(t, err, inbox.CauseInvalidArgument)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	for range 2 {
		factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: "stripe", Cause: inbox.CauseSignatureMismatch})
	}
	factory.Rejection(f.ctx, t, f.store, &factory.RejectionOpts{Source: "nope", Cause: inbox.CauseUnknownSource})
	r := must[*operations.Refusals](t)(f.read.Refusals(f.ctx, operations.RefusalsQuery{Limit: 2}))
	field.Must(t, "refusals", field.Printed("Total", r.Total, 3), field.Printed("len(Counts)", len(r.Counts), 2), field.Printed("len(Recent)", len(r.Recent), 2))
	field.Must(t, "refusals", field.Printed("Recent[0].Cause", r.Recent[0].Cause, inbox.CauseUnknownSource))
	_, err := f.read.Refusals(f.ctx, operations.RefusalsQuery{Limit: operations.MaxLimit + 1})
	cause(t, err, inbox.CauseInvalidArgument)
}

// A page of events is at most its limit, newest first; NextBefore walks
// to the last page, where it is null; the filters are checked.
func TestEventsPages(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	evs := factory.Events(f.ctx, t, f.store, 5, &factory.EventOpts{Type: "a"})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Type: "b", State: inbox.StateProcessed, Outcome: inbox.OutcomeUnhandled})
	var seen []int64
	q := operations.EventQuery{Type: "a", Limit: 2}
	for pages := 0; ; pages++ {
		p := must[*operations.EventPage](t)(f.read.Events(f.ctx, q))
		for _, e := range p.Events {
			seen = append(seen, e.ID)
		}
		if p.NextBefore == nil {
			if pages != 2 || len(p.Events) != 1 {
				t.Fatalf("the last page is page %d with %d events", pages+1, len(p.Events))
			}
			break
		}
		q.Before = *p.NextBefore
	}
	if len(seen) != 5 || seen[0] != evs[4].ID || seen[4] != evs[0].ID {
		t.Fatalf("pages hold %v", seen)
	}
	un := must[*operations.EventPage](t)(f.read.Events(f.ctx, operations.EventQuery{State: operations.StateUnhandled}))
	if len(un.Events) != 1 || un.Events[0].Type != "b" || *un.Events[0].Outcome != "unhandled" {
		t.Fatalf("unhandled = %+v", un.Events)
	}
	for name, q := range map[string]operations.EventQuery{
		"a state nobody has": {State: "sleeping"},
		"a limit too large":  {Limit: operations.MaxLimit + 1},
		"an empty window":    {Window: operations.Window{From: time.Now(), To: time.Now().Add(-time.Hour)}},
		"a NUL in a source":  {Source: "a\x00b"},
		"a negative cursor":  {Before: -1},
	} {
		_, err := f.read.Events(f.ctx, q)
		if inbox.CauseOf(err) != inbox.CauseInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Find takes what an operator types: an id, or the sender's id in one
// source or in every one (several sources may have it); nothing found is
// an empty page.
func TestFind(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	a := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "a", EventID: "evt_1"})
	b := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "b", EventID: "evt_1"})
	find := func(q operations.FindQuery) []int64 {
		var ids []int64
		for _, e := range must[*operations.EventPage](t)(f.read.Find(f.ctx, q)).Events {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := find(operations.FindQuery{Find: "evt_1"}); len(got) != 2 {
		t.Errorf("evt_1 everywhere = %v", got)
	}
	if got := find(operations.FindQuery{Find: "evt_1", Source: "b"}); len(got) != 1 || got[0] != b.ID {
		t.Errorf("evt_1 in b = %v", got)
	}
	if got := find(operations.FindQuery{Find: strconv.FormatInt(a.ID, 10)}); len(got) != 1 || got[0] != a.ID {
		t.Errorf("by id = %v", got)
	}
	if got := find(operations.FindQuery{Find: "evt_none"}); len(got) != 0 {
		t.Errorf("nothing = %v", got)
	}
	_, err := f.read.Find(f.ctx, operations.FindQuery{})
	cause(t, err, inbox.CauseInvalidArgument)
}

// An event in full: its history, dead letters (the open one named),
// mismatches; by id or by key; a name that names nothing is
// event_not_found.
func TestEventDetail(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	dead := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "github", EventID: "d1", State: inbox.StateDead, LastError: "nope",
		Metadata: map[string]string{"z": "1", "a": "2"}})
	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: dead.ID}))
	field.Must(t, "detail", field.Printed("Event.State", d.Event.State, inbox.StateDead), field.Printed("len(History)", len(d.History), 3),
		field.Printed("len(DeadLetters)", len(d.DeadLetters), 1), field.Printed("Event.NextAttemptAt set", d.Event.NextAttemptAt != nil, false),
		field.Printed("Event.BodySHA256 given", d.Event.BodySHA256 != "", true), field.Printed("Event.BodyInPostgres", d.Event.BodyInPostgres, true))
	field.Must(t, "detail", field.Printed("OpenDeadLetter", d.OpenDeadLetter, d.DeadLetters[0].ID))
	if keys := d.Event.MetadataKeys(); len(keys) != 2 || keys[0] != "a" {
		t.Errorf("metadata keys = %v", keys)
	}
	byKey := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{Source: "github", EventID: "d1"}))
	if byKey.Event.ID != dead.ID {
		t.Fatalf("by key = %+v", byKey.Event)
	}
	_, err := f.read.Event(f.ctx, operations.EventRef{ID: dead.ID + 100})
	cause(t, err, inbox.CauseEventNotFound)
	_, err = f.read.Event(f.ctx, operations.EventRef{ID: dead.ID, Source: "github", EventID: "d1"})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.read.Event(f.ctx, operations.EventRef{Source: "github"})
	cause(t, err, inbox.CauseInvalidArgument)
}

// A body comes from Postgres while it is there, else from its archive
// object, checked against the hash recorded at receipt; an expunged one is
// event_expunged; an archived one without the archive's settings is
// archive_not_configured; one that does not match its hash is
// body_corrupt.
func TestEventBody(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	old := time.Now().Add(-time.Hour)
	body := []byte(`{"id":"evt_a","type":"invoice.paid"}`)
	e := factory.Event(f.ctx, t, f.store, &factory.EventOpts{EventID: "evt_a", Body: body, State: inbox.StateProcessed, ProcessedAt: &old})
	b := must[*operations.Body](t)(f.read.EventBody(f.ctx, e.ID))
	if string(b.Bytes) != string(body) || b.From != operations.BodyFromPostgres || b.SHA256 == "" {
		t.Fatalf("body from postgres = %+v", b)
	}
	run := must[*operations.ArchiveRunResult](t)(f.act.ArchiveRun(f.ctx, operations.ArchiveRunRequest{}))
	if run.Events != 1 {
		t.Fatalf("archive run = %+v", run)
	}
	b = must[*operations.Body](t)(f.read.EventBody(f.ctx, e.ID))
	if string(b.Bytes) != string(body) || b.From != operations.BodyFromArchive || b.ArchiveKey == "" {
		t.Fatalf("body from the archive = %+v", b)
	}
	noArchive := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessRead}, operations.Deps{Store: f.store}))
	_, err := noArchive.EventBody(f.ctx, e.ID)
	cause(t, err, inbox.CauseArchiveNotConfigured)

	bad := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Body: []byte(`{}`), BodySHA256: make([]byte, 32)})
	_, err = f.read.EventBody(f.ctx, bad.ID)
	cause(t, err, inbox.CauseBodyCorrupt)
	gone := factory.Event(f.ctx, t, f.store, &factory.EventOpts{State: inbox.StateExpunged})
	_, err = f.read.EventBody(f.ctx, gone.ID)
	cause(t, err, inbox.CauseEventExpunged)
	_, err = f.read.EventBody(f.ctx, e.ID+1000)
	cause(t, err, inbox.CauseEventNotFound)
}

// A requeue counts first (a dry run, which a read-only API may do); it
// acts only where acting is allowed, for an operator; a confirmed count
// that no longer holds changes nothing; the action records the operator.
func TestRequeue(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 2, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	sel := operations.DeadLetterSelection{Source: "shop"}
	dry := must[*operations.RequeueResult](t)(f.read.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true}))
	if !dry.DryRun || dry.Events != 2 {
		t.Fatalf("dry run = %+v", dry)
	}
	_, err := f.read.Requeue(f.ctx, operations.RequeueRequest{Select: sel})
	cause(t, err, inbox.CauseReadOnly)
	_, err = f.act.Requeue(t.Context(), operations.RequeueRequest{Select: sel})
	cause(t, err, inbox.CauseUnauthenticated)
	_, err = f.act.Requeue(f.ctx, operations.RequeueRequest{})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: new(3)})
	cause(t, err, inbox.CauseCountChanged)
	if still := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, DryRun: true})); still.Events != 2 {
		t.Fatalf("a refused requeue changed something: %+v", still)
	}
	res := must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Select: sel, Expect: new(2), Reason: "INC-1"}))
	if res.DryRun || res.Events != 2 {
		t.Fatalf("requeue = %+v", res)
	}
	acts := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{}))
	field.Must(t, "actions", field.Printed("len(Actions)", len(acts.Actions), 1))
	act := acts.Actions[0]
	if act.Reason == nil {
		t.Fatal("the action has no reason")
	}
	field.Must(t, "action", field.Printed("Actor", act.Actor, "alice@ops"), field.Printed("Reason", *act.Reason, "INC-1"), field.Printed("Events", act.Events, 2))
	if p := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{})); len(p.DeadLetters) != 0 {
		t.Fatalf("open dead letters after the requeue = %+v", p.DeadLetters)
	}
}

func TestDeadLettersPages(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	factory.Events(f.ctx, t, f.store, 3, &factory.EventOpts{Source: "shop", State: inbox.StateDead})
	factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "other", State: inbox.StateDead})
	p := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{Source: "shop", Limit: 2}))
	if len(p.DeadLetters) != 2 || p.NextAfter == nil || len(p.DeadLetters[0].Errors) != 3 {
		t.Fatalf("first page = %+v", p)
	}
	p = must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{Source: "shop", Limit: 2, After: *p.NextAfter}))
	if len(p.DeadLetters) != 1 || p.NextAfter != nil {
		t.Fatalf("last page = %+v", p)
	}
	one := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{ID: p.DeadLetters[0].ID}))
	if len(one.DeadLetters) != 1 || one.DeadLetters[0].ID != p.DeadLetters[0].ID {
		t.Fatalf("by id = %+v", one)
	}
	if w := must[*operations.DeadLetterPage](t)(f.read.DeadLetters(f.ctx, operations.DeadLetterQuery{Window: operations.Window{To: time.Now().Add(-time.Hour)}})); len(w.DeadLetters) != 0 {
		t.Fatalf("dead before an hour ago = %+v", w)
	}
}

// A replay too large for one call goes on in further calls under one
// record, each event once; a continuation must be the same operator's,
// of the same selection; a read-only API counts but does not replay.
func TestReplayInCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	evs := factory.Events(f.ctx, t, f.store, 5, &factory.EventOpts{Source: "r", State: inbox.StateProcessed})
	sel := operations.ReplaySelection{Source: "r"}
	dry := must[*operations.ReplayResult](t)(f.read.Replay(f.ctx, operations.ReplayRequest{Select: sel, DryRun: true}))
	if dry.Matched != 5 || dry.Replayed != 0 {
		t.Fatalf("dry run = %+v", dry)
	}
	_, err := f.read.Replay(f.ctx, operations.ReplayRequest{Select: sel})
	cause(t, err, inbox.CauseReadOnly)
	_, err = f.act.Replay(f.ctx, operations.ReplayRequest{Select: sel, Expect: new(4)})
	cause(t, err, inbox.CauseCountChanged)
	_, err = f.act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Outcome: "maybe"}})
	cause(t, err, inbox.CauseInvalidArgument)

	first := must[*operations.ReplayResult](t)(f.act.Replay(f.ctx, operations.ReplayRequest{Select: sel, Expect: new(5), Max: 2}))
	if first.Matched != 5 || first.Replayed != 2 || first.Next == nil {
		t.Fatalf("first call = %+v", first)
	}
	bob := operations.WithOperator(t.Context(), operations.Operator{Name: "bob@ops"})
	_, err = f.act.Replay(bob, operations.ReplayRequest{Select: sel, Continue: first.Next, Max: 2})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Replay(f.ctx, operations.ReplayRequest{Select: operations.ReplaySelection{Source: "other"}, Continue: first.Next, Max: 2})
	cause(t, err, inbox.CauseInvalidArgument)
	_, err = f.act.Replay(f.ctx, operations.ReplayRequest{Select: sel, Continue: first.Next, DryRun: true})
	cause(t, err, inbox.CauseInvalidArgument)

	total, next := first.Replayed, first.Next
	for calls := 1; next != nil; calls++ {
		if calls > 5 {
			t.Fatal("the replay does not end")
		}
		r := must[*operations.ReplayResult](t)(f.act.Replay(f.ctx, operations.ReplayRequest{Select: sel, Continue: next, Max: 2}))
		if r.ActionID != first.ActionID {
			t.Fatalf("a continuation recorded as %d, not %d", r.ActionID, first.ActionID)
		}
		total, next = total+r.Replayed, r.Next
	}
	if total != 5 {
		t.Fatalf("replayed %d, want 5", total)
	}
	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: evs[4].ID}))
	field.Must(t, "the record", field.Printed("len(Actions)", len(d.Actions), 1))
	field.Must(t, "the record", field.Printed("ID", d.Actions[0].ID, first.ActionID), field.Printed("Events", d.Actions[0].Events, 5), field.Printed("Actor", d.Actions[0].Actor, "alice@ops"))
}

// An expunge says first what it would erase (a read-only API may ask);
// then it erases the body everywhere and the row stays.
func TestExpunge(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	e := factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "s", EventID: "evt_x", State: inbox.StateDead, LastError: "quoted body"})
	ref := operations.EventRef{Source: "s", EventID: "evt_x"}
	plan := must[*operations.ExpungeResult](t)(f.read.Expunge(f.ctx, operations.ExpungeRequest{Event: ref, DryRun: true}))
	field.Must(t, "plan", field.Printed("DryRun", plan.DryRun, true), field.Printed("ID", plan.ID, e.ID), field.Printed("BodyInPostgres", plan.BodyInPostgres, true),
		field.Printed("LastErrorStored", plan.LastErrorStored, true), field.Printed("AttemptErrors", plan.AttemptErrors, 3), field.Printed("DeadLetterCopies", plan.DeadLetterCopies, 1),
		field.Printed("NotReached given", len(plan.NotReached) != 0, true))
	_, err := f.read.Expunge(f.ctx, operations.ExpungeRequest{Event: ref})
	cause(t, err, inbox.CauseReadOnly)
	noArchive := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: f.store}))
	_, err = noArchive.Expunge(f.ctx, operations.ExpungeRequest{Event: ref})
	cause(t, err, inbox.CauseArchiveNotConfigured)

	done := must[*operations.ExpungeResult](t)(f.act.Expunge(f.ctx, operations.ExpungeRequest{Event: ref, Reason: "GDPR-7"}))
	if done.DryRun || done.ExpungedAt == nil || done.AttemptErrors != 3 {
		t.Fatalf("expunge = %+v", done)
	}
	_, err = f.read.EventBody(f.ctx, e.ID)
	cause(t, err, inbox.CauseEventExpunged)
	d := must[*operations.EventDetail](t)(f.read.Event(f.ctx, operations.EventRef{ID: e.ID}))
	field.Must(t, "after", field.Printed("Event.State", d.Event.State, inbox.StateExpunged), field.Printed("len(Actions)", len(d.Actions), 1))
	field.Must(t, "after", field.Printed("Actions[0].Action", d.Actions[0].Action, inbox.ActionExpunge), field.Printed("Actions[0].Actor", d.Actions[0].Actor, "alice@ops"))
}

// An archive run is bounded per call; the calls go on while it says it
// was cut short, until nothing is left; a read-only API only counts.
func TestArchiveRunInCalls(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	old := time.Now().Add(-time.Hour)
	factory.Events(f.ctx, t, f.store, 5, &factory.EventOpts{State: inbox.StateProcessed, ProcessedAt: &old})
	dry := must[*operations.ArchiveRunResult](t)(f.read.ArchiveRun(f.ctx, operations.ArchiveRunRequest{DryRun: true}))
	if dry.Archivable != 5 || dry.Events != 0 || dry.MinAge.String() != "1m" {
		t.Fatalf("dry run = %+v", dry)
	}
	_, err := f.read.ArchiveRun(f.ctx, operations.ArchiveRunRequest{})
	cause(t, err, inbox.CauseReadOnly)
	var events, objects, calls int
	for {
		calls++
		r := must[*operations.ArchiveRunResult](t)(f.act.ArchiveRun(f.ctx, operations.ArchiveRunRequest{MaxBatches: 1}))
		events, objects = events+r.Events, objects+r.Objects
		if !r.Truncated || r.Events == 0 {
			break
		}
	}
	// Batches of 2: three objects, then a call that finds nothing.
	if events != 5 || objects != 3 || calls != 4 {
		t.Fatalf("archived %d events in %d objects over %d calls", events, objects, calls)
	}
	if again := must[*operations.ArchiveRunResult](t)(f.act.ArchiveRun(f.ctx, operations.ArchiveRunRequest{DryRun: true})); again.Archivable != 0 {
		t.Fatalf("left after the run = %+v", again)
	}
}

func TestActionsPages(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	for range 3 {
		factory.Event(f.ctx, t, f.store, &factory.EventOpts{Source: "p", State: inbox.StateDead})
		must[*operations.RequeueResult](t)(f.act.Requeue(f.ctx, operations.RequeueRequest{Select: operations.DeadLetterSelection{Source: "p"}}))
	}
	p := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{Limit: 2}))
	if len(p.Actions) != 2 || p.NextBefore == nil || p.Actions[0].ID < p.Actions[1].ID {
		t.Fatalf("first page = %+v", p)
	}
	p = must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{Limit: 2, Before: *p.NextBefore}))
	if len(p.Actions) != 1 || p.NextBefore != nil {
		t.Fatalf("last page = %+v", p)
	}
	if p := must[*operations.ActionPage](t)(f.read.Actions(f.ctx, operations.ActionQuery{Since: operations.Span(time.Hour)})); len(p.Actions) != 3 {
		t.Fatalf("the last hour = %d actions", len(p.Actions))
	}
}

// A database that does not answer is database_unavailable, which the API
// answers 503.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	pool, err := storage.PoolConfig{URL: "postgres://nobody@127.0.0.1:1/none?sslmode=disable", ConnectTimeout: time.Second}.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := must[*operations.Service](t)(operations.New(operations.Config{Access: operations.AccessRead}, operations.Deps{Store: storage.New(pool)}))
	_, err = svc.Stats(t.Context(), operations.StatsQuery{})
	cause(t, err, inbox.CauseDatabaseUnavailable)
}
