package lambdalocal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/iamlocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localevents"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localinvoke"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localscheduler"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/samtemplate"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/relay"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

func TestMain(m *testing.M) {
	// Started by the emulator as a Lambda bootstrap, the test binary is
	// the tiny function of TestFunctionURLUnderTheEmulator.
	if os.Getenv(echoEnv) == "echo" {
		lambda.Start(echoFunction)
		return
	}
	pgtest.Main(m)
}

// TestEndToEndUnderTheEmulator is the deployed artefacts' test: the real
// bootstrap binaries, built once by the Makefile targets SAM calls, run
// under the AWS Lambda Runtime Interface Emulator as template.yaml
// describes them in two profiles, each deployed on this machine as
// CloudFormation deploys it (lambdalocal.StartStack): its buckets on a
// real S3 (versitygw) whose notifications reach a local EventBridge, a
// real Postgres that checks passwords, and the local Secrets Manager,
// EventBridge Scheduler and Lambda Invoke API, which the binaries reach
// through their real AWS SDK clients. Nothing runs on a clock: every
// invocation is a wake-up the stack's own wiring made.
func TestEndToEndUnderTheEmulator(t *testing.T) {
	tier.Heavy(t, "builds the Lambda binaries and runs them under the emulator")
	root, err := pinnedtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	standard := openTemplate(t, root, "standard")
	bins, err := lambdalocal.Build(context.Background(), root, t.TempDir(), standard.FunctionIDs())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("standard", func(t *testing.T) {
		t.Parallel()
		standardProfile(t, root, standard, bins)
	})
	t.Run("economy", func(t *testing.T) {
		t.Parallel()
		economyProfile(t, root, openTemplate(t, root, "economy"), bins)
	})
}

func openTemplate(t *testing.T, root, profile string) *samtemplate.Template {
	t.Helper()
	tpl, err := samtemplate.Open(filepath.Join(root, "template.yaml"), map[string]any{
		"Profile":          profile,
		"SourcesSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:inbox-sources-AbCdEf",
	})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// devSources returns dev/sources.json, as a document and parsed.
func devSources(t *testing.T, root string) ([]byte, *source.Set) {
	t.Helper()
	path := filepath.Join(root, "dev", "sources.json")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	set, err := source.Load(func(k string) string {
		if k == source.EnvSourcesFile {
			return path
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc, set
}

// clock is the local Scheduler's: it moves only when the test moves it.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// After moves the clock just past t.
func (c *clock) After(t time.Time) { c.ns.Store(t.Add(time.Second).UnixNano()) }
func (c *clock) String() string    { return c.Now().UTC().Format(time.RFC3339) }

// checkOutcomes: every processed event ended as the application's
// handlers (handlers.Register, compiled into the processor) route it:
// handled where a route serves it, unhandled elsewhere. The test holds
// whatever handlers a fork registers.
func checkOutcomes(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	reg := processor.NewRegistry()
	handlers.Register(reg)
	rows, err := conn.Query(context.Background(), `SELECT provider, source_kind, event_type, coalesce(outcome, '') FROM webhook_events WHERE processed_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	type processed struct{ source, kind, typ, outcome string }
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (processed, error) {
		var p processed
		err := r.Scan(&p.source, &p.kind, &p.typ, &p.outcome)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		want := inbox.OutcomeUnhandled
		if _, ok := reg.Lookup(ev.source, ev.kind, ev.typ); ok {
			want = inbox.OutcomeHandled
		}
		if ev.outcome != string(want) {
			t.Errorf("%s (%s) %s ended %q, want %q", ev.source, ev.kind, ev.typ, ev.outcome, want)
		}
	}
}

// refusal makes the processing of chosen events fail, whatever handler
// the application routes them to, or none: a trigger refuses to mark them
// processed, so their transaction fails, and the processor records the
// attempt (cause commit_failed) and arms its retry.
type refusal struct {
	t    *testing.T
	conn *pgx.Conn
}

func refuseProcessing(t *testing.T, conn *pgx.Conn) *refusal {
	t.Helper()
	_, err := conn.Exec(context.Background(), `
		CREATE TABLE lambdalocal_refused (event_id text PRIMARY KEY);
		CREATE FUNCTION lambdalocal_refuse() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM lambdalocal_refused WHERE event_id = NEW.event_id) THEN
				RAISE EXCEPTION 'refused by the test: event %', NEW.event_id;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER lambdalocal_refuse BEFORE UPDATE ON webhook_events FOR EACH ROW
			WHEN (OLD.processed_at IS NULL AND NEW.processed_at IS NOT NULL) EXECUTE FUNCTION lambdalocal_refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	return &refusal{t: t, conn: conn}
}

// event refuses the processing of the event with this id.
func (r *refusal) event(id string) {
	r.t.Helper()
	if _, err := r.conn.Exec(context.Background(), `INSERT INTO lambdalocal_refused VALUES ($1)`, id); err != nil {
		r.t.Fatal(err)
	}
}

// stop lets every event be processed again.
func (r *refusal) stop() {
	r.t.Helper()
	if _, err := r.conn.Exec(context.Background(), `DELETE FROM lambdalocal_refused`); err != nil {
		r.t.Fatal(err)
	}
}

// invocations returns the local Lambda's invocations of function id.
func invocations(stack *lambdalocal.Stack, id string) []localinvoke.Invocation {
	var out []localinvoke.Invocation
	for _, inv := range stack.Invoke.Invocations() {
		if inv.Function == id || inv.Function == stack.Names[id] {
			out = append(out, inv)
		}
	}
	return out
}

// idle waits until every invocation of function id has ended.
func idle(t *testing.T, stack *lambdalocal.Stack, id string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		invs := invocations(stack, id)
		return !slices.ContainsFunc(invs, func(inv localinvoke.Invocation) bool { return inv.Finished.IsZero() }), "running or queued:" + describe(invs)
	})
}

func describe(invs []localinvoke.Invocation) string {
	var b strings.Builder
	for _, inv := range invs {
		fmt.Fprintf(&b, "\n  %s via %s async=%v tries=%d err=%v payload=%.120s", inv.Function, inv.Via, inv.Async, inv.Tries, inv.Err, inv.Payload)
	}
	return b.String()
}

func post(t *testing.T, ctx context.Context, front *httptest.Server, req sender.Request, want string) {
	t.Helper()
	code, body, err := req.Post(ctx, front.Client(), front.URL)
	var ans struct{ Status string }
	_ = json.Unmarshal(body, &ans)
	if err != nil || code != 200 || ans.Status != want {
		t.Fatalf("%s delivery of %s: %d %s %v", req.Source, req.EventID, code, body, err)
	}
}

// standardProfile: the default profile on this machine. The migration
// front's Create has the migration function apply the schema and the
// roles (through the local Lambda Invoke API), the relay's copies the
// sources document to the control bucket, which the receiver reads.
// Signed webhooks of every kind go through the local API Gateway; the
// receiver wakes the processor after each commit with an asynchronous
// invoke, and the processor handles them, with no schedule and no
// polling loop anywhere. A handler that fails arms its retry (a marker
// the local S3 announces to the local EventBridge, which hands it to the
// relay, which creates a one-time schedule); fired, the schedule invokes
// the processor, which handles the retry. The processor arms the
// archiver the same way. The operator function answers through its two
// function URLs, and its replay wakes the processor. Each function
// connected as its own role. A deploy's Update goes through the front,
// and when the stack is torn down, with the migration function and
// Secrets Manager gone, both custom resources answer Delete at once.
func standardProfile(t *testing.T, root string, tpl *samtemplate.Template, bins map[string]string) {
	ctx := context.Background()
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t, pgtest.Passwords()))
	doc, set := devSources(t, root)
	// The operator function's URLs admit two local principals, as the
	// stack's two policies would: one may act, one may only read.
	operator, err := iamlocal.NewIdentity("operator", "read", "act")
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := iamlocal.NewIdentity("viewer", "read")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := iamlocal.NewVerifier("us-east-1", operator, viewer)
	if err != nil {
		t.Fatal(err)
	}
	sched := newClock(time.Now())
	// Bodies become archivable at once, so that the archiver is armed for
	// the next hour; a handler gives up after a second, and its retry is
	// due a second or so later.
	archiveNow := []string{"ARCHIVE_MIN_AGE=1ms"}
	dir := t.TempDir()
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: dir, Bootstraps: bins, DatabaseURL: dbURL, Sources: doc, SchedulerNow: sched.Now,
		Env: map[string][]string{
			"*":                    {"DATABASE_QUERY_MODE=exec", "LOG_LEVEL=info"},
			"ProcessorFunction":    append([]string{"PROCESSOR_HANDLER_TIMEOUT=1s", "PROCESSOR_BACKOFF_BASE=1s"}, archiveNow...),
			"ArchiverFunction":     archiveNow,
			"OperatorFunction":     archiveNow,
			"OperatorReadFunction": archiveNow,
		},
		IAM: verifier, URLTargets: map[string]string{"OperatorFunction": "act", "OperatorReadFunction": "read"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	front := httptest.NewServer(stack.Front)
	defer front.Close()
	control := s3test.Open(t, stack.Buckets["ControlBucket"])
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// The deploy: the front answered DatabaseSchema, having invoked the
	// migration function (the only synchronous invocation through the
	// Lambda API); the relay answered SourcesCopy, and the copy is the
	// secret's document.
	if r, _ := stack.Schema.Response(); r["Status"] != "SUCCESS" || !strings.Contains(fmt.Sprint(r["Reason"]), "roles webhook_receiver") {
		t.Fatalf("DatabaseSchema answered %s", stack.Schema.Body)
	}
	invs := invocations(stack, lambdalocal.MigrationFunctionID)
	if len(invs) != 1 {
		t.Fatalf("the migration function's invocations, want one: %s", describe(invs))
	}
	if !field.Check(t, "the migration function's invocation",
		field.Eq("Async", invs[0].Async, false),
		field.Eq("Via", invs[0].Via, localinvoke.ViaAPI),
		field.Is("Payload", string(invs[0].Payload), strings.Contains(string(invs[0].Payload), `"ApplyVersion"`), "an ApplyVersion request"),
	) {
		t.FailNow()
	}
	if r, _ := stack.Created["SourcesCopy"].Response(); r["Status"] != "SUCCESS" {
		t.Fatalf("SourcesCopy answered %s", stack.Created["SourcesCopy"].Body)
	}
	if got, err := control.Get(ctx, relay.DefaultSourcesKey); err != nil || string(got) != string(doc) {
		t.Fatalf("the sources' copy: %.80q, %v", got, err)
	}

	// Signed webhooks of every kind, each sent twice: accepted, then
	// duplicate; a forged one refused.
	var ids []string
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		req, err := sender.Sample(src, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		post(t, ctx, front, req, "accepted")
		post(t, ctx, front, req, "duplicate")
		ids = append(ids, req.EventID)
	}
	stripe, _ := set.Lookup("stripe")
	forged, _ := sender.Sample(stripe, time.Now())
	forged.Body = []byte(strings.Replace(string(forged.Body), "2000", "9000", 1))
	if code, body, _ := forged.Post(ctx, front.Client(), front.URL); code != 401 || !strings.Contains(string(body), "unauthenticated") {
		t.Fatalf("forged delivery: %d %s", code, body)
	}
	unprocessed := func(where string) func() (bool, string) {
		return func() (bool, string) {
			var n int
			_ = conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`+where).Scan(&n)
			return n == 0, fmt.Sprintf("%d events not processed; processor: %s", n, describe(invocations(stack, "ProcessorFunction")))
		}
	}

	// (a) Processed, every one, by processors that the receiver woke with
	// an asynchronous invoke of {"wake":"receipt"} after its commits:
	// nothing else invoked the processor, and no schedule fired.
	poll.Until(t, 60*time.Second, unprocessed(""))
	var rows int
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM webhook_events`).Scan(&rows)
	if rows != len(ids) {
		t.Fatalf("rows=%d (want %d)", rows, len(ids))
	}
	checkOutcomes(t, conn)
	woken := invocations(stack, "ProcessorFunction")
	for _, inv := range woken {
		if inv.Via != localinvoke.ViaAPI || !inv.Async || string(inv.Payload) != `{"wake":"receipt"}` {
			t.Fatalf("the processor was invoked otherwise than by the receiver's wake-up: %s", describe(woken))
		}
	}
	if len(woken) == 0 || len(stack.Scheduler.Fired()) != 0 {
		t.Fatalf("wake-ups %s; schedules fired %v", describe(woken), stack.Scheduler.Fired())
	}
	// A late webhook, once the invocations it might have joined are over
	// (each lingers PROCESSOR_RUN_FOR, 1 s, past the receiver's last
	// wake-up, longer than its WAKE_DEBOUNCE, 500 ms): woken again, at
	// once.
	idle(t, stack, "ProcessorFunction")
	woken = invocations(stack, "ProcessorFunction")
	github, _ := set.Lookup("github")
	late, _ := sender.Sample(github, time.Now())
	received := time.Now()
	post(t, ctx, front, late, "accepted")
	ids = append(ids, late.EventID)
	poll.Until(t, 30*time.Second, unprocessed(" AND event_id = '"+late.EventID+"'"))
	if n := len(invocations(stack, "ProcessorFunction")); n != len(woken)+1 {
		t.Fatalf("the late webhook's wake-up: %s", describe(invocations(stack, "ProcessorFunction")))
	}
	t.Logf("the late webhook was processed within %v of being sent (receiver, asynchronous invoke, processor, under the emulator)",
		time.Since(received).Round(time.Millisecond))

	// A rotation of the sources secret: its event reaches the relay
	// through the template's rule, and the copy follows.
	rotated := append(append([]byte(nil), doc...), '\n')
	if ds, err := stack.RotateSources(rotated); err != nil || len(ds) != 1 || ds[0].Rule != "RelayFunction.SourcesChanged" {
		t.Fatalf("the rotation's deliveries: %+v, %v", ds, err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		got, err := control.Get(ctx, relay.DefaultSourcesKey)
		return err == nil && string(got) == string(rotated), fmt.Sprintf("the copy: %d bytes, %v; relay: %s", len(got), err, describe(invocations(stack, lambdalocal.RelayFunctionID)))
	})

	// What the receipts and the processing armed: the sweep after the
	// receipts and the archiver's next hour, each a marker the relay
	// turned into a one-time schedule.
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var targets []string
		for _, sc := range stack.Scheduler.Schedules() {
			targets = append(targets, sc.Name)
		}
		return slices.ContainsFunc(targets, func(n string) bool { return strings.HasPrefix(n, "processor-") }) &&
			slices.ContainsFunc(targets, func(n string) bool { return strings.HasPrefix(n, "archiver-") }), fmt.Sprintf("schedules %v", targets)
	})
	targets := map[string]string{"processor": "webhook-inbox-processor", "archiver": "webhook-inbox-archiver"}
	for _, sc := range stack.Scheduler.Schedules() {
		field.Check(t, "schedule "+sc.Name,
			field.Eq("ActionAfterCompletion", sc.ActionAfterCompletion, "DELETE"),
			field.Eq("Target.Arn", sc.Target.Arn, lambdalocal.FunctionARN(targets[strings.SplitN(sc.Name, "-", 2)[0]])),
			field.Eq("Target.Input", sc.Target.Input, relay.WakeInput),
			field.Is("GroupName", sc.GroupName, strings.HasSuffix(sc.GroupName, "-wake"), "ending -wake"),
		)
	}
	for _, inv := range invocations(stack, lambdalocal.RelayFunctionID) {
		if (inv.Via != "events:RelayFunction.Arm" && inv.Via != "events:RelayFunction.SourcesChanged") || !inv.Async || inv.Err != nil {
			t.Errorf("the relay's invocation %s", describe([]localinvoke.Invocation{inv}))
		}
	}

	// (c) An event whose processing fails (its transaction refused by a
	// trigger the test adds, whatever handler the application routes it
	// to) arms the event's retry; the schedule the relay made, fired,
	// invokes the processor, which processes it once the trigger is gone.
	before := scheduleNames(stack, "processor-")
	failing := refuseProcessing(t, conn)
	idle(t, stack, "ProcessorFunction") // past the receiver's debounce again
	retried, _ := sender.Sample(stripe, time.Now())
	failing.event(retried.EventID)
	post(t, ctx, front, retried, "accepted")
	ids = append(ids, retried.EventID)
	var armed localscheduler.Schedule
	latestArmed := func() {
		for _, sc := range stack.Scheduler.Schedules() {
			if strings.HasPrefix(sc.Name, "processor-") && !slices.Contains(before, sc.Name) && sc.Name > armed.Name {
				armed = sc
			}
		}
	}
	var failed int
	poll.Until(t, 30*time.Second, func() (bool, string) {
		latestArmed()
		_ = conn.QueryRow(ctx, `SELECT attempts FROM webhook_events WHERE event_id = $1`, retried.EventID).Scan(&failed)
		return failed >= 1 && armed.Name != "", fmt.Sprintf("attempts %d; schedules %v", failed, scheduleNames(stack, ""))
	})
	// The failure is immediate and the backoff short (1 s): the invocation
	// may retry it while it lingers. Once it has ended, nothing else
	// invokes the processor but the schedule.
	idle(t, stack, "ProcessorFunction")
	latestArmed()
	_ = conn.QueryRow(ctx, `SELECT attempts FROM webhook_events WHERE event_id = $1`, retried.EventID).Scan(&failed)
	// The marker behind it (wake/arm/processor/<minute>), and the event
	// the bus handed the relay for it.
	minute, err := time.Parse("20060102T1504", strings.TrimPrefix(armed.Name, "processor-"))
	if err != nil {
		t.Fatal(err)
	}
	marker := wake.ArmKey(wake.TargetProcessor, minute)
	if _, err := control.Head(ctx, marker); err != nil {
		t.Fatalf("the retry's marker %s: %v", marker, err)
	}
	if !slices.ContainsFunc(stack.Events.Deliveries(), func(d localevents.Delivery) bool {
		return d.Rule == "RelayFunction.Arm" && strings.Contains(string(d.Event), `"detail-type":"Object Created"`) && strings.Contains(string(d.Event), `"key":"`+marker+`"`)
	}) {
		t.Fatalf("no Object Created event of %s reached the relay", marker)
	}
	failing.stop()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var due bool
		_ = conn.QueryRow(ctx, `SELECT next_attempt_at <= now() FROM webhook_events WHERE event_id = $1`, retried.EventID).Scan(&due)
		return due, "the retry is not due yet"
	})
	sched.After(armed.At)
	fired := stack.Scheduler.FireDue(ctx)
	if !slices.ContainsFunc(fired, func(f localscheduler.Fired) bool { return f.Schedule.Name == armed.Name && f.Err == nil }) {
		t.Fatalf("firing at %s: %+v", sched, fired)
	}
	poll.Until(t, 30*time.Second, unprocessed(" AND event_id = '"+retried.EventID+"'"))
	var attempts int
	_ = conn.QueryRow(ctx, `SELECT attempts FROM webhook_events WHERE event_id = $1`, retried.EventID).Scan(&attempts)
	if attempts != failed+1 {
		t.Fatalf("after the retry: attempts=%d, want %d", attempts, failed+1)
	}
	checkOutcomes(t, conn)
	if !slices.ContainsFunc(invocations(stack, "ProcessorFunction"), func(inv localinvoke.Invocation) bool {
		return inv.Via == "scheduler:"+armed.GroupName+"/"+armed.Name && string(inv.Payload) == relay.WakeInput
	}) {
		t.Fatalf("the retry's processor: %s", describe(invocations(stack, "ProcessorFunction")))
	}

	// The archiver, when its armed hour comes: time passes for the
	// Scheduler until every body is archived.
	fireUntil(t, ctx, stack, sched, func() (bool, string) {
		var archived, bodies int
		_ = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE archived_at IS NOT NULL), count(body) FROM webhook_events`).Scan(&archived, &bodies)
		return archived == len(ids) && bodies == 0, fmt.Sprintf("archived=%d of %d, bodies left=%d", archived, len(ids), bodies)
	})
	if objects, err := s3test.Open(t, stack.Buckets["ArchiveBucket"]).List(ctx, "archive/"); err != nil || len(objects) < len(set.Names()) {
		t.Fatalf("objects = %d, %v; want one per source (%d) at least", len(objects), err, len(set.Names()))
	}
	if archiver := invocations(stack, "ArchiverFunction"); len(archiver) == 0 || !strings.HasPrefix(archiver[0].Via, "scheduler:") {
		t.Fatalf("the archiver's invocations: %s", describe(archiver))
	}

	// The operator function, deployed twice as the template says, through
	// its function URLs; its replay wakes the processor, which handles it.
	wakes := len(invocations(stack, "ProcessorFunction"))
	checkOperatorAPI(t, ctx, stack, operator, viewer, len(ids))
	poll.Until(t, 30*time.Second, unprocessed(""))
	if invs := invocations(stack, "ProcessorFunction")[wakes:]; !slices.ContainsFunc(invs, func(inv localinvoke.Invocation) bool {
		return inv.Via == localinvoke.ViaAPI && string(inv.Payload) == `{"wake":"receipt"}`
	}) {
		t.Fatalf("the replay's wake-up: %s", describe(invs))
	}

	// Each serving function connected as its own role (their pools stay
	// open between invocations; the migration function's closed with its
	// request), and no function's role may change the schema.
	activity, err := conn.Query(ctx, `SELECT DISTINCT application_name, usename::text FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'webhook-inbox-%' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	who, err := pgx.CollectRows(activity, func(r pgx.CollectableRow) (string, error) {
		var app, user string
		err := r.Scan(&app, &user)
		return app + "=" + user, err
	})
	want := []string{"webhook-inbox-archiver=webhook_archiver",
		"webhook-inbox-operator=webhook_operator", "webhook-inbox-operator=webhook_operator_read",
		"webhook-inbox-processor=webhook_processor", "webhook-inbox-receiver=webhook_receiver"}
	if err != nil || !slices.Equal(who, want) {
		t.Fatalf("connections: %v (%v), want %v", who, err, want)
	}
	for id, roleURL := range stack.RoleURLs {
		rc, err := pgx.Connect(ctx, roleURL)
		if err != nil {
			t.Fatalf("%s's database URL: %v", id, err)
		}
		_, err = rc.Exec(ctx, `DROP TABLE webhook_events`)
		rc.Close(ctx)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: DROP TABLE: %v, want SQLSTATE 42501", id, err)
		}
	}
	for id, d := range stack.InitDurations() {
		t.Logf("%s: init duration %v (the emulator's INIT REPORT line)", id, d)
	}
	if got, all := len(stack.InitDurations()), len(tpl.FunctionIDs()); got != all {
		t.Fatalf("init durations reported for %d functions of %d: %v", got, all, stack.InitDurations())
	}

	// (d) The next deploy's Update, through the front; then the teardown.
	update, err := stack.Update(ctx, lambdalocal.SchemaResourceID)
	if r, _ := update.Response(); err != nil || r["Status"] != "SUCCESS" {
		t.Fatalf("DatabaseSchema's Update answered %s (%v)", update.Body, err)
	}
	if n := len(invocations(stack, lambdalocal.MigrationFunctionID)); n != 2 {
		t.Fatalf("the migration function was invoked %d times, want 2 (Create, Update)", n)
	}
	answers, err := stack.Teardown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, a := range answers {
		r, _ := a.Response()
		t.Logf("%s's Delete answered in %v with the migration function and Secrets Manager gone: %s: %s", id, a.Took.Round(time.Millisecond), r["Status"], r["Reason"])
	}
	if r, _ := answers[lambdalocal.SchemaResourceID].Response(); r["Status"] != "SUCCESS" || !strings.Contains(fmt.Sprint(r["Reason"]), "nothing deleted") {
		t.Fatalf("DatabaseSchema's Delete answered %s", answers[lambdalocal.SchemaResourceID].Body)
	}
	if left, err := control.List(ctx, ""); err != nil || len(left) != 0 {
		t.Fatalf("left in the control bucket after SourcesCopy's Delete: %v %v", left, err)
	}

	// No role's password in any function's output.
	for _, id := range tpl.FunctionIDs() {
		b, err := os.ReadFile(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for role, u := range stack.RoleURLs {
			if pw := passwordOf(u); pw != "" && strings.Contains(string(b), pw) {
				t.Errorf("%s's output holds %s's password", id, role)
			}
		}
	}
}

// economyProfile: no interface endpoint, so the receiver wakes the
// processor with an empty wake/now/ marker in the control bucket, which
// S3 announces to EventBridge, whose rule (ProcessorWakeRule) invokes the
// processor: here the local S3's notification, the local bus, and the
// rule read from the template.
func economyProfile(t *testing.T, root string, tpl *samtemplate.Template, bins map[string]string) {
	ctx := context.Background()
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t, pgtest.Passwords()))
	doc, set := devSources(t, root)
	operator, _ := iamlocal.NewIdentity("operator", "read", "act")
	verifier, err := iamlocal.NewVerifier("us-east-1", operator)
	if err != nil {
		t.Fatal(err)
	}
	stack, err := lambdalocal.StartStack(ctx, lambdalocal.StackOptions{
		Template: tpl, RepoRoot: root, Dir: t.TempDir(), Bootstraps: bins, DatabaseURL: dbURL, Sources: doc,
		Env: map[string][]string{"*": {"DATABASE_QUERY_MODE=exec", "LOG_LEVEL=info"}},
		IAM: verifier, URLTargets: map[string]string{"OperatorFunction": "act", "OperatorReadFunction": "read"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	front := httptest.NewServer(stack.Front)
	defer front.Close()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	github, _ := set.Lookup("github")
	req, _ := sender.Sample(github, time.Now())
	post(t, ctx, front, req, "accepted")
	poll.Until(t, 60*time.Second, func() (bool, string) {
		var processed bool
		_ = conn.QueryRow(ctx, `SELECT processed_at IS NOT NULL FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&processed)
		return processed, "not processed; processor: " + describe(invocations(stack, "ProcessorFunction"))
	})
	woken := invocations(stack, "ProcessorFunction")
	if len(woken) == 0 {
		t.Fatal("no processor invocation")
	}
	control := stack.Buckets["ControlBucket"].Bucket
	for _, inv := range woken {
		var ev localevents.Event
		_ = json.Unmarshal(inv.Payload, &ev)
		obj, _ := ev.Detail["object"].(map[string]any)
		bucket, _ := ev.Detail["bucket"].(map[string]any)
		if !field.Check(t, "a processor invocation, want one by a wake/now/ marker's event",
			field.Eq("Via", inv.Via, "events:ProcessorWakeRule"),
			field.Eq("Async", inv.Async, true),
			field.Eq("source", ev.Source, "aws.s3"),
			field.Eq("detail-type", ev.DetailType, "Object Created"),
			field.Eq("detail.bucket.name", bucket["name"], any(control)),
			field.Is("detail.object.key", obj["key"], strings.HasPrefix(fmt.Sprint(obj["key"]), wake.PrefixNow), "under "+wake.PrefixNow),
		) {
			t.FailNow()
		}
	}
	if markers, err := s3test.Open(t, stack.Buckets["ControlBucket"]).List(ctx, wake.PrefixNow); err != nil || len(markers) != len(woken) {
		t.Fatalf("wake/now/ markers %v (%v) for %d wake-ups", markers, err, len(woken))
	}
	if len(stack.Scheduler.Fired()) != 0 {
		t.Fatalf("a schedule fired: %v", stack.Scheduler.Fired())
	}
}

// scheduleNames returns the names of the schedules starting with prefix.
func scheduleNames(stack *lambdalocal.Stack, prefix string) []string {
	var out []string
	for _, sc := range stack.Scheduler.Schedules() {
		if strings.HasPrefix(sc.Name, prefix) {
			out = append(out, sc.Name)
		}
	}
	return out
}

// fireUntil lets time pass for the Scheduler, schedule after schedule (the
// clock set to each next one's time, which is fired), until cond holds.
func fireUntil(t *testing.T, ctx context.Context, stack *lambdalocal.Stack, sched *clock, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if done, _ := cond(); done {
			return
		}
		var next time.Time
		for _, sc := range stack.Scheduler.Schedules() {
			if sc.State == "ENABLED" && (next.IsZero() || sc.At.Before(next)) {
				next = sc.At
			}
		}
		if !next.IsZero() && next.After(sched.Now()) {
			sched.After(next)
		}
		stack.Scheduler.FireDue(ctx)
		if ok, _ := poll.Wait(2*time.Second, cond); ok {
			return
		}
		if time.Now().After(deadline) {
			_, state := cond()
			t.Fatalf("after firing every schedule up to %s: %s; schedules %v", sched, state, scheduleNames(stack, ""))
		}
	}
}

func passwordOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}
