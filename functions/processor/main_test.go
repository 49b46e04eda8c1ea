package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const sources = `{"sources":{
  "stripe": {"kind":"stripe","secrets":["whsec_lambda_test_0123456789ab"]},
  "square": {"kind":"square","secrets":["square-key_01234"],"notification_url":"https://hooks.example.com/webhooks/square"}
}}`

// scheduled loads the event `sam local invoke` is given
// (events/schedule.json): any event wakes the processor, whatever its shape.
func scheduled(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// register registers the tests' own handler (not the application's, which
// a fork changes) by source kind, as the application's are.
func register(r *processor.Registry) {
	testhandler.Register(r, processor.Kind("stripe"), "invoice.payment_failed")
	testhandler.Register(r, processor.Kind("square"), "order.created")
}

// TestScheduledDrain: the Lambda entry, each invocation one drain
// (PROCESSOR_RUN_FOR=0), connected as the processor's database role,
// drains what the receiver stored, with the handlers routed by source kind
// writing their table (created by the migration function, not by the
// processor, with an identity column), and the unhandled event marked
// processed.
func TestScheduledDrain(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	env := map[string]string{"DATABASE_URL": pgtest.RoleURL(t, url, migrate.RoleProcessor), "WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error", "PROCESSOR_RUN_FOR": "0"}
	h, pool, err := setupWith(t.Context(), func(k string) string { return env[k] }, register)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	owner, err := pgxpool.New(t.Context(), url) // the owner seeds and checks
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	store := storage.New(owner)
	for _, d := range []storage.EventInsertParams{
		{Source: "stripe", EventID: "evt_fail_1", EventType: "invoice.payment_failed", Body: []byte(
			`{"id":"evt_fail_1","object":"event","type":"invoice.payment_failed","created":1717430400,
			  "data":{"object":{"id":"in_1","object":"invoice","customer":"cus_1","amount_due":4900,"currency":"usd","attempt_count":1}}}`)},
		{Source: "square", EventID: "sq-evt-1", EventType: "order.created", Body: []byte(
			`{"merchant_id":"M1","type":"order.created","event_id":"sq-evt-1","data":{"type":"order","id":"o1",
			  "object":{"order_created":{"order_id":"o1","location_id":"L1","state":"OPEN","version":1}}}}`)},
		{Source: "stripe", EventID: "evt_cust", EventType: "customer.created", Body: []byte(`{"id":"evt_cust","type":"customer.created"}`)},
	} {
		if _, err := store.EventInsert(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // the Lambda's deadline
	defer cancel()
	st, err := h(ctx, scheduled(t))
	if err != nil {
		t.Fatalf("invocation: %v", err)
	}
	if !field.Check(t, "invocation",
		field.Eq("Handled", st.Handled, 2),
		field.Eq("Unhandled", st.Unhandled, 1),
		field.Eq("Stopped", st.Stopped, processor.StopDrained),
	) {
		t.FailNow()
	}
	for src, id := range map[string]string{"stripe": "evt_fail_1", "square": "sq-evt-1"} {
		if recs, err := testhandler.Records(t.Context(), owner, src); err != nil || len(recs) != 1 || recs[0].EventID != id {
			t.Fatalf("%s: records = %+v, %v", src, recs, err)
		}
	}
	// The connections carry the processor's session timeouts.
	var stmt, idle string
	if err := pool.QueryRow(t.Context(), `SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')`).Scan(&stmt, &idle); err != nil {
		t.Fatal(err)
	}
	if stmt != "35s" || idle != "35s" {
		t.Fatalf("session timeouts = %s, %s", stmt, idle)
	}
	// A second wake-up finds nothing.
	if st, err := h(ctx, scheduled(t)); err != nil || st.Claimed != 0 {
		t.Fatalf("second invocation = %+v, %v", st, err)
	}
}

// TestInvocationInRealTime: an invocation keeps polling for
// PROCESSOR_RUN_FOR, as the processor's role: an event stored while it
// runs is handled by it, and it ends with one metrics line.
func TestInvocationInRealTime(t *testing.T) {
	tier.Heavy(t, "an invocation polling for PROCESSOR_RUN_FOR in real time")
	t.Parallel()
	url := pgtest.URL(t)
	env := map[string]string{
		"DATABASE_URL": pgtest.RoleURL(t, url, migrate.RoleProcessor), "WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error",
		"PROCESSOR_RUN_FOR": "2s", "PROCESSOR_POLL_INTERVAL": "50ms",
	}
	h, pool, err := setupWith(t.Context(), func(k string) string { return env[k] }, register)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	owner, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	type result struct {
		st  processor.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := h(ctx, scheduled(t))
		done <- result{st, err}
	}()
	// Stored once the invocation is polling: its first claim, the first
	// statement its role runs on this database, has found nothing.
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var n int
		_ = owner.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		  WHERE usename = $1 AND datname = current_database() AND state = 'idle' AND query <> ''`, migrate.RoleProcessor).Scan(&n)
		return n > 0, "the invocation has not claimed yet"
	})
	if _, err := storage.New(owner).EventInsert(ctx, storage.EventInsertParams{
		Source: "stripe", EventID: "evt_rt", EventType: "customer.created", Body: []byte(`{"id":"evt_rt","type":"customer.created"}`),
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var processed bool
		_ = owner.QueryRow(ctx, `SELECT processed_at IS NOT NULL FROM webhook_events WHERE event_id = 'evt_rt'`).Scan(&processed)
		select {
		case res := <-done:
			t.Fatalf("the invocation returned before handling the event: %+v, %v", res.st, res.err)
		default:
		}
		return processed, "the event is not processed"
	})
	res := <-done
	if res.err != nil || res.st.Unhandled != 1 || res.st.Stopped != processor.StopDrained {
		t.Fatalf("invocation = %+v, %v", res.st, res.err)
	}
}

// TestNearDeadlineInvocationClaimsNothing: an invocation left with less
// than the safety margin does not start a batch it could not finish.
func TestNearDeadlineInvocationClaimsNothing(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.URL(t), "WEBHOOK_SOURCES": sources, "LOG_LEVEL": "error"}
	h, pool, err := setupWith(t.Context(), func(k string) string { return env[k] }, register)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // below the 40s default margin
	defer cancel()
	if st, err := h(ctx, scheduled(t)); err != nil || st.Stopped != processor.StopDeadline || st.Claimed != 0 {
		t.Fatalf("invocation = %+v, %v", st, err)
	}
}

func TestSetupFailsFast(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no database":     {map[string]string{}, "DATABASE_URL"},
		"bad sources":     {map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "WEBHOOK_SOURCES": `{"sources":{"a":{"kind":"nope","secrets":["x"]}}}`}, `source "a"`},
		"bad lease":       {map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "PROCESSOR_LEASE": "soon"}, "PROCESSOR_LEASE"},
		"unknown policy":  {map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "PROCESSOR_UNHANDLED": "drop"}, "PROCESSOR_UNHANDLED"},
		"margin too thin": {map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x", "PROCESSOR_HANDLER_TIMEOUT": "1m", "PROCESSOR_SAFETY_MARGIN": "30s"}, "PROCESSOR_SAFETY_MARGIN"},
	} {
		_, _, err := setupWith(t.Context(), func(k string) string { return tc.env[k] }, register)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to name %s", name, err, tc.want)
		}
	}
}

// TestDatabaseDownAtInitIsNotFatal: a cold start without the database
// still starts; the invocations fail until it is back.
func TestDatabaseDownAtInitIsNotFatal(t *testing.T) {
	t.Parallel()
	// A short run: it polls through the failures and fails at its end.
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x?connect_timeout=1", "LOG_LEVEL": "error", "PROCESSOR_RUN_FOR": "1s", "PROCESSOR_POLL_INTERVAL": "50ms"}
	h, pool, err := setupWith(t.Context(), func(k string) string { return env[k] }, register)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := h(ctx, scheduled(t)); err == nil {
		t.Fatal("an invocation without a database succeeded")
	}
}

// TestSetupReportsEveryProblemAtOnce: the logger's and the processor's
// settings fail together, each naming its variable.
func TestSetupReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOG_LEVEL": "loud", "PROCESSOR_LEASE": "soon", "PROCESSOR_UNHANDLED": "ignore"}
	_, _, err := setupWith(t.Context(), func(k string) string { return env[k] }, register)
	for _, want := range []string{"DATABASE_URL", "LOG_LEVEL", "PROCESSOR_LEASE", "PROCESSOR_UNHANDLED"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// paidInvoicesRegister is a user's handler taking invoice.paid for every
// Stripe source, which a handler package (here the tests' own) already
// handles.
func paidInvoicesRegister(r *processor.Registry) {
	testhandler.Register(r, processor.Kind("stripe"), "invoice.paid")
	r.HandleFunc(processor.Kind("stripe"), "invoice.paid", func(context.Context, pgx.Tx, *processor.Event) error { return nil })
}

// TestSetupRefusesADuplicateRoute: a route registered twice fails start-up
// with one line naming both registrations (no panic, no stack trace), before
// the database is even reached.
func TestSetupRefusesADuplicateRoute(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://x@127.0.0.1:1/x?connect_timeout=1", "LOG_LEVEL": "error"}
	_, _, err := setupWith(t.Context(), func(k string) string { return env[k] }, paidInvoicesRegister)
	if err == nil {
		t.Fatal("setup with a duplicate route succeeded")
	}
	want := regexp.MustCompile(`^processor: route kind stripe, type invoice\.paid registered twice: ` +
		`by internal/testkit/testhandler\.Register \(testhandler\.go:\d+\) and by functions/processor\.paidInvoicesRegister \(main_test\.go:\d+\)$`)
	if !want.MatchString(err.Error()) {
		t.Fatalf("err = %q, want one line matching %s", err, want)
	}
}

// TestConfigFromEnv: the function reads the processor's settings and, each
// with its own package's reader, the wake-ups and the archive, reporting
// every problem at once, each once (the database's settings are
// lambdadb.Connect's, with the processor's session settings).
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL": "postgres://x@h/db", "PROCESSOR_HANDLER_TIMEOUT": "1m", "PROCESSOR_SAFETY_MARGIN": "90s",
		"WAKE_MODE": "object", "WAKE_BUCKET": "control", "ARCHIVE_BUCKET": "archive",
	}
	c, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if pool := c.processor.Pool(storage.PoolConfig{URL: env["DATABASE_URL"]}); pool.RuntimeParams["statement_timeout"] != "65000" || !pool.CancelOnContext {
		t.Errorf("pool = %+v, want the processor's session settings", pool)
	}
	if c.waking.Bucket != "control" {
		t.Errorf("wake-ups' bucket = %q, want control", c.waking.Bucket)
	}
	if c.archive.Bucket != "archive" {
		t.Errorf("archive's bucket = %q, want archive", c.archive.Bucket)
	}

	env = map[string]string{"DATABASE_QUERY_MODE": "fast", "PROCESSOR_BATCH_SIZE": "many", "WAKE_MODE": "shout", "ARCHIVE_BUCKET": "b", "ARCHIVE_SSE": "none"}
	_, err = configFromEnv(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"PROCESSOR_BATCH_SIZE", "WAKE_MODE", "ARCHIVE_SSE"} {
		if n := strings.Count(err.Error(), v); n != 1 {
			t.Errorf("%s named %d times, want once:\n%v", v, n, err)
		}
	}
}
