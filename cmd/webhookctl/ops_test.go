package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// opsFixture is a database of its own with events in every state, for
// the operator commands; env is the commands' whole environment, so tests
// run in parallel.
type opsFixture struct {
	// consoleTokenURL is the token's address the last console printed.
	consoleTokenURL string
	t               *testing.T
	ctx             context.Context
	pool            *pgxpool.Pool
	store           *storage.Store
	env             map[string]string
	// s3 is the archive's configuration once withArchive was called.
	s3 *blobstore.Config
}

// appliedDDL records each application of an event by the test handler.
const appliedDDL = `CREATE TABLE applied (event_pk BIGINT NOT NULL)`

func newOpsFixture(t *testing.T) *opsFixture {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the database is dropped
	if _, err := pool.Exec(ctx, appliedDDL); err != nil {
		t.Fatal(err)
	}
	return &opsFixture{t: t, ctx: ctx, pool: pool, store: storage.New(pool), env: map[string]string{"DATABASE_URL": url}}
}

// withArchive starts an S3 server with a bucket of its own and gives the
// commands the archiver's settings for it.
func (f *opsFixture) withArchive() {
	f.t.Helper()
	srv := s3test.Server(f.t)
	cfg := s3test.Bucket(f.t, srv)
	f.s3 = &cfg
	f.env["ARCHIVE_BUCKET"] = cfg.Bucket
	f.env["ARCHIVE_PREFIX"] = "archive"
	f.env["S3_ENDPOINT"] = cfg.Endpoint
	f.env["S3_ACCESS_KEY_ID"] = cfg.AccessKeyID
	f.env["S3_SECRET_ACCESS_KEY"] = cfg.SecretAccessKey
	f.env["AWS_REGION"] = "us-east-1"
}

// run executes webhookctl with the fixture's environment; stdout and
// stderr are apart, as a script sees them.
func (f *opsFixture) run(args ...string) (stdout, stderr string, err error) {
	f.t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs(args)
	env := f.env
	err = cmd.ExecuteContext(withEnv(f.ctx, func(k string) string { return env[k] }))
	return out.String(), errOut.String(), err
}

// runOK runs and fails the test on an error.
func (f *opsFixture) runOK(args ...string) string {
	f.t.Helper()
	out, errOut, err := f.run(args...)
	if err != nil {
		f.t.Fatalf("webhookctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// runJSON runs with --json and decodes the output into v.
func (f *opsFixture) runJSON(v any, args ...string) {
	f.t.Helper()
	out := f.runOK(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		f.t.Fatalf("webhookctl %s --json printed no JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// insert stores an event through the receiver's query; the source's kind
// is its name.
func (f *opsFixture) insert(source, eventID, eventType string) int64 {
	f.t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":%q}`, eventID, eventType)
	return f.insertBody(source, eventID, eventType, []byte(body))
}

func (f *opsFixture) insertBody(source, eventID, eventType string, body []byte) int64 {
	f.t.Helper()
	res, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{
		Source: source, SourceKind: source, EventID: eventID, EventType: eventType, Body: body,
	})
	if err != nil || !res.Inserted {
		f.t.Fatalf("insert %s/%s: %+v %v", source, eventID, res, err)
	}
	return res.ID
}

// insertMany stores n events through the receiver's query, from several
// connections at once (a large fixture, quickly), each id prefix and a
// number.
func (f *opsFixture) insertMany(n int, source, prefix, eventType string) {
	f.t.Helper()
	const workers = 8
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				id := fmt.Sprintf("%s%06d", prefix, i)
				res, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: source, SourceKind: source, EventID: id, EventType: eventType,
					Body: fmt.Appendf(nil, `{"id":%q,"type":%q}`, id, eventType)})
				if err == nil && !res.Inserted {
					err = fmt.Errorf("%s was not inserted", id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
}

// registry routes, for the sources "stripe" and "github": type "ok" is
// applied (a row in applied), "poison" is a permanent error (dead letter
// at once), "flaky" fails and is retried; other types have no handler
// (marked processed, outcome unhandled).
func registry() *processor.Registry {
	reg := processor.NewRegistry()
	for _, k := range []string{"stripe", "github"} {
		reg.HandleFunc(processor.Kind(k), "ok", func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO applied (event_pk) VALUES ($1)`, ev.ID)
			return err
		})
		reg.HandleFunc(processor.Kind(k), "poison", func(context.Context, pgx.Tx, *processor.Event) error {
			return processor.Permanent(errors.New("cannot decode the payload"))
		})
		reg.HandleFunc(processor.Kind(k), "flaky", func(context.Context, pgx.Tx, *processor.Event) error {
			return errors.New("the downstream API answered 503")
		})
	}
	return reg
}

// drain runs the processor once on clock now (nil: the wall clock).
func (f *opsFixture) drain(now func() time.Time) processor.Stats {
	f.t.Helper()
	deps := processor.Deps{Pool: f.pool, Registry: registry(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	if now != nil {
		deps.Clock = testclock.At(now())
	}
	p, err := processor.New(processor.Config{}, deps)
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := p.Drain(f.ctx)
	if err != nil {
		f.t.Fatalf("drain: %v", err)
	}
	return st
}

func (f *opsFixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(f.ctx, sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// snapshot is every event's processing state, by id, to compare before
// and after a change.
func (f *opsFixture) snapshot() map[int64]string {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `
SELECT id, concat_ws('|', processed_at, outcome, attempts, failed_attempts, solo, last_attempt_at, last_error, next_attempt_at, dead_at,
       body IS NULL, payload IS NULL, expunged_at, archived_at)
  FROM webhook_events`)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			f.t.Fatal(err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// changed returns the ids whose state differs between two snapshots.
func changed(before, after map[int64]string) map[int64]bool {
	out := map[int64]bool{}
	for id, s := range after {
		if before[id] != s {
			out[id] = true
		}
	}
	return out
}

func idSet(ids ...int64) map[int64]bool {
	out := map[int64]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func sameSet(a, b map[int64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestOperatorCommandsNeedTheDatabase: without DATABASE_URL every operator
// command says which variable is missing.
func TestOperatorCommandsNeedTheDatabase(t *testing.T) {
	t.Parallel()
	f := &opsFixture{t: t, ctx: t.Context(), env: map[string]string{}}
	for _, args := range [][]string{
		{"stats"}, {"events", "list"}, {"events", "show", "1"}, {"dead-letters", "list"},
		{"dead-letters", "requeue", "--all", "--dry-run"}, {"replay", "--all", "--dry-run"},
		{"expunge", "1", "--dry-run"}, {"archive", "run", "--dry-run"}, {"actions"}, {"whoami"},
	} {
		if _, _, err := f.run(args...); err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
