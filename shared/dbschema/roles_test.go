package dbschema_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// The tests of this file run each function's code paths connected as the
// function's own role, on the schema and grants the migration function
// leaves (pgtest applies them): a statement that needs a privilege the
// role lacks fails here, naming itself, instead of in a deployed function.

const sourcesDoc = `{"sources": {
  "stripe": {"kind": "stripe", "secrets": ["whsec_roles_test_0123456789abc"]},
  "square": {"kind": "square", "secrets": ["square-key_01234"], "notification_url": "https://hooks.example.com/webhooks/square"},
  "github": {"kind": "github", "secrets": ["github-roles-test-secret"]}
}}`

// TestReceiverRunsAsItsRole: every statement the receiver sends, as
// webhook_receiver: an insert, a duplicate, a duplicate with another body
// (the mismatch record), a body that is not JSON, a refusal (the rejection
// ring buffer, twice, so the upsert updates), and a guarded source's body
// under a second id (the suspected replay and its record).
// clockFunc is a clock that reads the time from a function (archive.Clock,
// receiver.Clock).
type clockFunc func() time.Time

func (c clockFunc) Now() time.Time { return c() }

func TestReceiverRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	sources, err := source.Parse([]byte(sourcesDoc))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// A refused record (a mismatch, a rejection) only logs: no line may
	// carry an error.
	var logs bytes.Buffer
	asReceiver := storage.New(pgtest.As(t, owner, migrate.RoleReceiver))
	h, err := receiver.New(receiver.Config{}, receiver.Deps{
		Sources: sources, Store: asReceiver,
		Clock: clockFunc(func() time.Time { return now }), Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	stripe, _ := sources.Lookup("stripe")
	post := func(body []byte, id string, forge bool) int {
		t.Helper()
		sr, err := sender.Sign(stripe, body, id, now)
		if err != nil {
			t.Fatal(err)
		}
		if forge {
			body = append(body, ' ')
			now = now.Add(2 * time.Second) // past the rejection sampler's interval
		}
		r := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", bytes.NewReader(body))
		for k, v := range sr.Header {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("receiver answered %d: %s", w.Code, w.Body)
		}
		return w.Code
	}
	json := func(id, typ string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":{}}}`, id, typ, now.Unix())
	}
	for _, c := range []struct {
		body  []byte
		id    string
		forge bool
		want  int
	}{
		{json("evt_role_1", "invoice.paid"), "evt_role_1", false, 200},
		{json("evt_role_1", "invoice.paid"), "evt_role_1", false, 200},                                                    // duplicate
		{append(json("evt_role_1", "invoice.paid"), ' '), "evt_role_1", false, 200},                                       // another body
		{[]byte(`{"id":"evt_role_2","type":"x","created":1,"data":{"object":{"n":1e999999}}}`), "evt_role_2", false, 200}, // JSONB refuses it
		{json("evt_role_3", "invoice.paid"), "evt_role_3", true, 401},
		{json("evt_role_4", "invoice.paid"), "evt_role_4", true, 401},
		{json("evt_role_5", "invoice.paid"), "evt_role_5", true, 401},
	} {
		if got := post(c.body, c.id, c.forge); got != c.want {
			t.Fatalf("%s: %d, want %d", c.id, got, c.want)
		}
	}
	github, _ := sources.Lookup("github")
	ghBody := []byte(`{"action":"opened","issue":{"id":1}}`)
	for _, id := range []string{"d-role-1", "d-role-2"} {
		sr, err := sender.SignEvent(github, ghBody, id, "issues", now)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(ghBody))
		r.Header = sr.Header
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("github %s: %d %s", id, w.Code, w.Body)
		}
	}
	// The rejection records are written in the background: Close writes
	// them (as the receiver's role) before it returns.
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(logs.Bytes(), []byte(`"err":`)) {
		t.Fatalf("the receiver logged an error:\n%s", logs.String())
	}
	store := storage.New(owner)
	if ms, err := store.PayloadMismatchListByEvent(ctx, "github", "d-role-1"); err != nil || len(ms) != 1 || ms[0].Cause != inbox.CauseSuspectedReplay {
		t.Fatalf("suspected replay records = %+v, %v", ms, err)
	}
	if n, err := store.PayloadMismatchCountByEvent(ctx, "stripe", "evt_role_1"); err != nil || n != 1 {
		t.Fatalf("mismatches = %d, %v", n, err)
	}
	if ev, err := store.EventGetByKey(ctx, "stripe", "evt_role_2"); err != nil || ev.Payload != nil {
		t.Fatalf("the non-JSONB body: %+v, %v", ev, err)
	}
	if rs, err := store.RejectionList(ctx, now.Add(-time.Hour), 10); err != nil || len(rs) != 3 {
		t.Fatalf("rejections = %+v, %v", rs, err)
	}
	// The forged deliveries were refused for their signature: kept in
	// quarantine, as the receiver's role, within its cap (counted by the
	// provider column alone).
	if n, err := store.QuarantineCount(ctx, storage.QuarantineFilter{Source: "stripe"}); err != nil || n != 3 {
		t.Fatalf("quarantined = %d, %v", n, err)
	}
	if kept, err := asReceiver.QuarantineInsert(ctx, inbox.Quarantined{Source: "stripe", SourceKind: "stripe", Cause: inbox.CauseSignatureMismatch, ReceivedAt: now, Body: []byte("x")}, 3); err != nil || kept {
		t.Fatalf("beyond the cap as the receiver's role: kept %v, %v", kept, err)
	}
	// A full ring buffer overwrites its oldest slot, an update: with a
	// capacity of one, the second record is one.
	for i := range 2 {
		r := inbox.Rejection{Source: "stripe", Cause: inbox.CauseSignatureMismatch, Message: "m", ReceivedAt: now}
		if err := asReceiver.RejectionInsert(ctx, r, 1); err != nil {
			t.Fatalf("rejection %d as the receiver's role: %v", i, err)
		}
	}
}

// TestProcessorRunsAsItsRole: the processor's statements and every
// handler's, as webhook_processor: handled events (each handler package's
// table written), an unhandled one, a failure, a dead letter, an attempt
// interrupted by a crash, released events and the backlog.
func TestProcessorRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	store := storage.New(owner)
	clock := testclock.At(time.Now().Add(time.Minute))
	reg := processor.NewRegistry()
	// The tests' own handler package, not the application's: its table has
	// an identity column, whose sequence the role must be able to use.
	testhandler.Register(reg, processor.Kind("app"), "order.created", "order.updated")
	reg.HandleFunc(processor.Source("test"), "fails", func(context.Context, pgx.Tx, *processor.Event) error { return errors.New("down") })
	reg.HandleFunc(processor.Source("test"), "poison", func(context.Context, pgx.Tx, *processor.Event) error {
		return processor.Permanent(errors.New("never"))
	})
	reg.HandleFunc(processor.Source("test"), "slow", func(context.Context, pgx.Tx, *processor.Event) error {
		clock.Advance(55 * time.Second) // the rest of the batch no longer fits the lease
		return nil
	})
	for _, o := range []factory.EventOpts{
		{Source: "shop", SourceKind: "app", Type: "order.created"},
		{Source: "shop", SourceKind: "app", Type: "order.updated"},
		{Source: "stripe", SourceKind: "stripe", Type: "customer.created"},
		{Source: "test", SourceKind: "test", Type: "fails"},
		{Source: "test", SourceKind: "test", Type: "poison"},
		// A processor died holding it: the recovery records the attempt.
		{Source: "test", SourceKind: "test", Type: "unhandled.too", State: inbox.StateInFlight, ClaimedUntil: new(time.Now())},
		// Its run's attempts are spent: a dead letter, nothing run.
		{Source: "test", SourceKind: "test", Type: "fails", State: inbox.StateRetrying, Attempts: processor.DefaultMaxAttempts, NextAttemptAt: time.Now()},
		// Its source is paused (below): held at its claim, not run.
		{Source: "paused", SourceKind: "test", Type: "fails"},
	} {
		factory.Event(ctx, t, store, &o)
	}
	if ok, err := store.PauseInsert(ctx, inbox.Pause{Scope: inbox.PauseSource, Name: "paused", PausedAt: time.Now(), Actor: "ops@test"}); err != nil || !ok {
		t.Fatalf("pause: %v, %v", ok, err)
	}
	// The metrics' line carries the backlog and the open dead letters, read
	// at the end of the drain.
	var logs bytes.Buffer
	p, err := processor.New(processor.Config{}, processor.Deps{
		Pool: pgtest.As(t, owner, migrate.RoleProcessor), Registry: reg, Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := p.Drain(dctx)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if !field.Check(t, "drain",
		field.Eq("Handled", st.Handled, 2),
		field.Eq("Unhandled", st.Unhandled, 2),
		field.Eq("Retried", st.Retried, 1),
		field.Eq("DeadLettered", st.DeadLettered, 2),
		field.Eq("Interrupted", st.Interrupted, 1),
		field.Eq("Held", st.Held, 1),
	) {
		t.FailNow()
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"BacklogCount"`)) || bytes.Contains(logs.Bytes(), []byte("backlog_err")) {
		t.Fatalf("the backlog was not read:\n%s", logs.String())
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"DeadLettersOpen":2`)) || bytes.Contains(logs.Bytes(), []byte("dead_letters_err")) {
		t.Fatalf("the open dead letters were not read:\n%s", logs.String())
	}

	// A slow event: what follows it in the batch is released.
	for range 3 {
		factory.Event(ctx, t, store, &factory.EventOpts{Source: "test", SourceKind: "test", Type: "slow"})
	}
	p2, err := processor.New(processor.Config{
		Lease: time.Minute, HandlerTimeout: 5 * time.Second, SafetyMargin: 10 * time.Second, BatchSize: 3,
	}, processor.Deps{Pool: pgtest.As(t, owner, migrate.RoleProcessor), Registry: reg, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p2.Drain(dctx); err != nil || st.Released == 0 {
		t.Fatalf("drain with a slow event = %+v, %v", st, err)
	}
	if recs, err := testhandler.Records(ctx, owner, "shop"); err != nil || len(recs) != 2 || recs[0].ID == recs[1].ID {
		t.Fatalf("the handler's records = %+v, %v", recs, err)
	}
}

// TestArchiverRunsAsItsRole: an archive run, as webhook_archiver: the
// orphan sweep, a batch's candidates, lock, manifest and marks, and the
// bloat estimate of its line, which needs the statistics of every column
// of the tables it gauges (pg_stats shows a role only the columns it may
// SELECT).
func TestArchiverRunsAsItsRole(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	owner := pgtest.Pool(t)
	store := storage.New(owner)
	srv := s3test.Server(t)
	blobs := s3test.Open(t, s3test.Bucket(t, srv))
	for range 3 {
		factory.Event(ctx, t, store, &factory.EventOpts{State: inbox.StateProcessed, Now: time.Now().Add(-2 * time.Hour)})
	}
	// An upload whose batch never committed: the sweep's work.
	if err := store.ArchiveObjectPrepare(ctx, "archive/orphan.jsonl.gz", "stripe"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	asArchiver := storage.New(pgtest.As(t, owner, migrate.RoleArchiver))
	a, err := archive.New(archive.Config{Prefix: "archive", MinAge: time.Hour}, archive.Deps{
		Store: asArchiver, Blobs: blobs, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		// Past the pending grace: the orphan is an earlier run's.
		Clock: testclock.At(time.Now().Add(archive.DefaultPendingGrace + time.Second)),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.RunOnce(ctx)
	if err != nil || res.Events != 3 || res.Swept != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	if !bytes.Contains(logs.Bytes(), []byte(`"`+archive.MetricTableBloat+`"`)) || bytes.Contains(logs.Bytes(), []byte("bloat_err")) {
		t.Fatalf("the bloat was not estimated:\n%s", logs.String())
	}
	// Two days on, with a day's body retention: the object is deleted and
	// its events marked, and the body of an event processed since (not
	// archivable with this archiver's long age) is cleared in Postgres.
	factory.Event(ctx, t, store, &factory.EventOpts{State: inbox.StateProcessed, CreatedAt: time.Now().Add(-time.Hour)})
	expiring, err := archive.New(archive.Config{Prefix: "archive", MinAge: 30 * 24 * time.Hour, BodyRetention: 24 * time.Hour},
		archive.Deps{Store: asArchiver, Blobs: blobs, Clock: testclock.At(time.Now().Add(48 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := expiring.RunOnce(ctx); err != nil || res.ExpiredObjects != 1 || res.ExpiredEvents != 4 {
		t.Fatalf("retention run = %+v, %v", res, err)
	}
	// An upload no manifest row names (it landed after its batch died),
	// swept once older than the guard: recorded, locked, deleted.
	late := "archive/provider=stripe/dt=2026-01-02/900-901.jsonl.gz"
	if _, err := blobs.Put(ctx, late, []byte("late"), archive.ContentType); err != nil {
		t.Fatal(err)
	}
	later, err := archive.New(archive.Config{Prefix: "archive"},
		archive.Deps{Store: asArchiver, Blobs: blobs, Clock: clockFunc(func() time.Time { return time.Now().Add(archive.DefaultOrphanMinAge + time.Hour) })})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := later.RunOnce(ctx); err != nil || res.Swept != 1 {
		t.Fatalf("run sweeping an unrecorded upload = %+v, %v", res, err)
	}
	if _, err := blobs.Head(ctx, late); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("the unrecorded upload after the sweep: %v", err)
	}
	// Analyzed, and more than a page (a single page has nothing to
	// estimate), the tables the archiver gauges have an estimate as its
	// role, not "no_privilege".
	factory.Events(ctx, t, store, 60, &factory.EventOpts{Body: bytes.Repeat([]byte("x"), 500)})
	if _, err := owner.Exec(ctx, `ANALYZE webhook_events, webhook_archive_objects`); err != nil {
		t.Fatal(err)
	}
	rels, err := asArchiver.PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range rels {
		if r.Table == "webhook_events" || r.Table == "webhook_archive_objects" {
			seen++
			if !r.Known() && r.Unknown != storage.BloatNotBtree { // the BRIN indexes of 00010 are not estimated
				t.Errorf("%s as %s: %s", r.Name, migrate.RoleArchiver, r.Unknown)
			}
		}
	}
	if seen < 8 {
		t.Fatalf("%d relations of webhook_events and webhook_archive_objects estimated: %+v", seen, rels)
	}
	// The check has teeth: the receiver, which may read four columns of
	// webhook_events, gets no estimate of it.
	rels, err = storage.New(pgtest.As(t, owner, migrate.RoleReceiver)).PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		if r.Name == "webhook_events" && r.Unknown != storage.BloatNoPrivilege {
			t.Fatalf("webhook_events as %s: %+v, want no_privilege", migrate.RoleReceiver, r)
		}
	}
}

// TestRolesCannotChangeTheSchema: each function's role is refused (SQLSTATE
// 42501, insufficient privilege) any DDL, and any table or column outside
// its grants.
func TestRolesCannotChangeTheSchema(t *testing.T) {
	t.Parallel()
	owner := pgtest.Pool(t)
	ddl := []string{
		`CREATE TABLE intruder (id int)`,
		`CREATE VIEW intruder AS SELECT 1`,
		`CREATE INDEX intruder ON webhook_events (event_type)`,
		`ALTER TABLE webhook_events ADD COLUMN intruder int`,
		`ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_provider_event_id_key`,
		`DROP TABLE webhook_events`,
		`DROP TABLE testkit_records`,
		`TRUNCATE webhook_events`,
		`CREATE SCHEMA intruder`,
		`CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`CREATE ROLE intruder`,
		`ALTER ROLE current_user CREATEDB`,
		`CREATE DATABASE intruder`,
		`SELECT * FROM goose_db_version`,
		`DELETE FROM webhook_events`,
	}
	outside := map[string][]string{
		migrate.RoleReceiver: {
			`SELECT body FROM webhook_events`,
			`SELECT payload FROM webhook_events`,
			`SELECT * FROM webhook_events`,
			`UPDATE webhook_events SET processed_at = now()`,
			`SELECT * FROM webhook_dead_letters`,
			`SELECT * FROM webhook_payload_mismatches`,
			`SELECT * FROM webhook_archive_objects`,
			`INSERT INTO webhook_archive_objects (key, provider) VALUES ('k', 'p')`,
			`SELECT * FROM testkit_records`,
			`INSERT INTO webhook_events (provider, event_id, body_sha256, body_size, processed_at) VALUES ('p', 'e', '\x00', 0, now())`,
			`DELETE FROM webhook_source_activity`,
			`SELECT body FROM webhook_quarantine`,
			`SELECT id FROM webhook_quarantine`,
			`UPDATE webhook_quarantine SET last_error = ''`,
			`DELETE FROM webhook_quarantine`,
		},
		migrate.RoleProcessor: {
			`INSERT INTO webhook_events (provider, event_id, body_sha256, body_size) VALUES ('p', 'e', '\x00', 0)`,
			`UPDATE webhook_events SET body = NULL`,
			`UPDATE webhook_events SET archive_key = 'x'`,
			`SELECT * FROM webhook_dead_letters`,
			`UPDATE webhook_dead_letters SET requeued_at = now()`,
			`SELECT * FROM webhook_rejections`,
			`SELECT * FROM webhook_payload_mismatches`,
			`SELECT * FROM webhook_archive_objects`,
			`INSERT INTO webhook_archive_objects (key, provider) VALUES ('k', 'p')`,
			`DELETE FROM testkit_records`,
			`UPDATE testkit_records SET event_type = ''`,
			// The receivers' record of the sources is read, never written.
			`UPDATE webhook_source_activity SET silent_after = NULL`,
			`INSERT INTO webhook_source_activity (provider, seen_at, updated_at) VALUES ('p', now(), now())`,
			`SELECT * FROM webhook_quarantine`,
		},
		migrate.RoleArchiver: {
			`INSERT INTO webhook_events (provider, event_id, body_sha256, body_size) VALUES ('p', 'e', '\x00', 0)`,
			`UPDATE webhook_events SET processed_at = now()`,
			`UPDATE webhook_events SET dead_at = now()`,
			`SELECT * FROM webhook_dead_letters`,
			`SELECT * FROM webhook_rejections`,
			`SELECT * FROM webhook_payload_mismatches`,
			`SELECT * FROM testkit_records`,
			`INSERT INTO testkit_records (source, event_id, event_type) VALUES ('s', 'e', 't')`,
			`SELECT * FROM webhook_source_activity`,
			`SELECT * FROM webhook_quarantine`,
		},
		// Read-only in the database itself: every write of every table,
		// and the handlers' tables, which no operator page shows.
		migrate.RoleOperatorRead: {
			`INSERT INTO webhook_events (provider, event_id, body_sha256, body_size) VALUES ('p', 'e', '\x00', 0)`,
			`UPDATE webhook_events SET processed_at = NULL`,
			`UPDATE webhook_events SET body = NULL`,
			`UPDATE webhook_dead_letters SET requeued_at = now()`,
			`UPDATE webhook_attempts SET error = ''`,
			`INSERT INTO webhook_operator_actions (action, actor) VALUES ('requeue', 'x')`,
			`UPDATE webhook_operator_actions SET events = 0`,
			`INSERT INTO webhook_operator_action_events (event_pk, action_id) VALUES (1, 1)`,
			`INSERT INTO webhook_archive_objects (key, provider) VALUES ('k', 'p')`,
			`DELETE FROM webhook_archive_objects`,
			`UPDATE webhook_claims SET event_ids = '{}'`,
			`DELETE FROM webhook_rejections`,
			`SELECT nextval('webhook_operator_actions_id_seq')`,
			`SELECT * FROM webhook_events FOR UPDATE`,
			`SELECT * FROM testkit_records`,
			`UPDATE webhook_source_activity SET silent_after = NULL`,
			`DELETE FROM webhook_quarantine`,
			`UPDATE webhook_quarantine SET last_error = ''`,
			`SELECT * FROM webhook_quarantine FOR UPDATE`,
		},
		// The acting operator writes only what its actions write: never an
		// event's key, hash or attempt count, a new event or dead letter,
		// the attempt history beyond its errors, another's claim, a
		// record's author or time, or the handlers' tables.
		migrate.RoleOperator: {
			`INSERT INTO webhook_events (provider, event_id, body_sha256, body_size, attempts) VALUES ('p', 'e', '\x00', 0, 1)`,
			`INSERT INTO webhook_quarantine (provider, source_kind, cause, body, body_sha256, body_size) VALUES ('p', 'k', 'signature_mismatch', '', '\x00', 0)`,
			`UPDATE webhook_quarantine SET body = ''`,
			`UPDATE webhook_events SET event_id = 'x'`,
			`UPDATE webhook_events SET body_sha256 = '\x00'`,
			`UPDATE webhook_events SET attempts = 0`,
			`INSERT INTO webhook_dead_letters (event_pk, provider, event_id, attempts) VALUES (1, 'p', 'e', 1)`,
			`DELETE FROM webhook_dead_letters`,
			`UPDATE webhook_dead_letters SET event_pk = 1`,
			`INSERT INTO webhook_attempts (event_pk, attempt, started_at, outcome) VALUES (1, 1, now(), 'handled')`,
			`UPDATE webhook_attempts SET outcome = 'handled'`,
			`DELETE FROM webhook_attempts`,
			`UPDATE webhook_claims SET event_ids = '{}'`,
			`DELETE FROM webhook_claims`,
			`INSERT INTO webhook_operator_actions (action, actor, db_user) VALUES ('requeue', 'x', 'postgres')`,
			`INSERT INTO webhook_operator_actions (action, actor, at) VALUES ('requeue', 'x', now())`,
			`UPDATE webhook_operator_actions SET actor = 'someone else'`,
			`DELETE FROM webhook_operator_actions`,
			`DELETE FROM webhook_operator_action_events`,
			`UPDATE webhook_archive_objects SET key = 'k'`,
			`DELETE FROM webhook_rejections`,
			`DELETE FROM webhook_payload_mismatches`,
			`SELECT * FROM testkit_records`,
			`DELETE FROM testkit_records`,
			`UPDATE webhook_source_activity SET silent_after = NULL`,
		},
	}
	for _, role := range migrate.FunctionRoles() {
		conn, err := pgx.Connect(t.Context(), pgtest.RoleURL(t, owner.Config().ConnString(), role))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for _, stmt := range append(append([]string(nil), ddl...), outside[role]...) {
			_, err := conn.Exec(t.Context(), stmt)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("%s: %s: got %v, want SQLSTATE 42501 (insufficient privilege)", role, stmt, err)
			}
		}
	}
}
