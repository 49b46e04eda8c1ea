package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/operatorclient"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testhandler"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lockedBuffer is the dev stack's output, read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// idlePasses is a slog.Handler that counts the archiver's summary lines of
// runs that archived nothing.
type idlePasses struct{ n atomic.Int64 }

func (p *idlePasses) Load() int64                              { return p.n.Load() }
func (p *idlePasses) Enabled(context.Context, slog.Level) bool { return true }
func (p *idlePasses) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *idlePasses) WithGroup(string) slog.Handler            { return p }
func (p *idlePasses) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "archive: run done" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "events" && a.Value.Int64() == 0 {
			p.n.Add(1)
		}
		return true
	})
	return nil
}

// TestDevStack runs the dev stack as make dev does (on DATABASE_URL, a
// local S3, a short archive age): a sample is accepted, processed in real
// time (within about the poll interval of its receipt) by the deployed
// handlers and archived to S3; the log reads as lines for a
// person, with no EMF and no line for the archiver's idle passes; the
// stack file tells an operator's command where it is while it runs; and
// Ctrl-C stops everything cleanly and removes the file. Each component
// connects as its deployed role, with a password the stack keeps in its
// roles file, and a handler writing to a table no Schema declares fails
// as it would deployed, with the privilege and the entry to add.
func TestDevStack(t *testing.T) {
	tier.Heavy(t, "runs the whole dev stack")
	t.Parallel()
	url := pgtest.URL(t)
	// The checked-in sources, in a file the test may edit.
	devSources, err := os.ReadFile(filepath.Join("..", "..", "dev", "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	sourcesFile := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(sourcesFile, devSources, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": url, "LOG_LEVEL": "info", "WEBHOOK_SOURCES_FILE": sourcesFile}
	stackFile := filepath.Join(t.TempDir(), "devstack.json")
	samEnvFile := filepath.Join(t.TempDir(), "env.json")
	rolesFile := filepath.Join(t.TempDir(), "roles.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A table of the user's that no Schema declares: the owner made it,
	// the processor's role may not write it.
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(context.Background())
	if _, err := owner.Exec(ctx, `CREATE TABLE dev_undeclared (id bigint GENERATED ALWAYS AS IDENTITY, event_id text)`); err != nil {
		t.Fatal(err)
	}
	// The tests' own handler serves every Stripe event, whatever the
	// application registers.
	register := func(r *processor.Registry) {
		testhandler.Register(r, processor.Kind("stripe"), processor.AnyType)
		r.HandleFunc(processor.Source("github"), processor.AnyType, func(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO dev_undeclared (event_id) VALUES ($1)`, ev.EventID)
			return err
		})
	}
	var out lockedBuffer
	// The archiver's passes that archived nothing, counted from its own
	// lines, before the dev stack's log drops them.
	passes := &idlePasses{}
	done := make(chan error, 1)
	go func() {
		done <- devstack.Run(ctx, &out, devstack.Options{
			ArchiveLog: passes,
			Addr:       "127.0.0.1:0", S3Dir: t.TempDir(), ArchiveAge: time.Millisecond, ArchiveEvery: 200 * time.Millisecond,
			StackFile: stackFile, SamEnvFile: samEnvFile, RolesFile: rolesFile, Register: register, Schemas: pgtest.Schemas, Getenv: func(k string) string { return env[k] },
		})
	}()
	base := regexp.MustCompile(`receiver: (http://[0-9.:]+)/webhooks`)
	var m []string
	poll.Until(t, 60*time.Second, func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("dev stopped: %v\n%s", err, out.String())
		default:
		}
		// The last start-up line says the stack is whole: the stack file
		// and env.json are written before it, not before the first line.
		s := out.String()
		m = base.FindStringSubmatch(s)
		return m != nil && strings.Contains(s, "Ctrl-C stops the stack."), "the dev stack did not start:\n" + s
	})

	// Each component as its role, said at start-up; their passwords kept
	// for the next run, readable by this user alone.
	if !strings.Contains(out.String(), "database roles: receiver as webhook_receiver, processor as webhook_processor, archiver as webhook_archiver, "+
		"operator API (acting) as webhook_operator, operator API (read-only) as webhook_operator_read, each with its deployed grants (passwords in "+rolesFile) {
		t.Errorf("no roles in the start-up lines:\n%s", out.String())
	}
	if fi, err := os.Stat(rolesFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("roles file: %v %v", fi, err)
	}
	var rolePasswords map[string]string
	rolesJSON, err := os.ReadFile(rolesFile)
	if err == nil {
		err = json.Unmarshal(rolesJSON, &rolePasswords)
	}
	if err != nil {
		t.Fatalf("roles file: %v", err)
	}
	if !field.Check(t, "roles file",
		field.Eq("roles", len(rolePasswords), 5),
		field.Eq("webhook_processor's password set", rolePasswords["webhook_processor"] != "", true),
	) {
		t.FailNow()
	}

	// The stack file: this process, this database, the local S3.
	b, err := os.ReadFile(stackFile)
	if err != nil {
		t.Fatalf("no stack file while running: %v", err)
	}
	if !bytes.Contains(b, []byte(url)) || !bytes.Contains(b, []byte(`"S3_ENDPOINT": "http://127.0.0.1:`)) ||
		!bytes.Contains(b, []byte(`"ARCHIVE_BUCKET": "webhook-inbox-dev"`)) {
		t.Fatalf("stack file:\n%s", b)
	}

	// The operator API, as a stack serves it: the acting and the
	// read-only URLs, each behind the stand-in for IAM, with the local
	// identities' credentials in the stack file for webhookctl --via-api.
	var st checkout.Stack
	if err := json.Unmarshal(b, &st); err != nil || st.Operator == nil {
		t.Fatalf("no operator API in the stack file (%v):\n%s", err, b)
	}
	for name, want := range map[string]operations.Access{"operator": operations.AccessAct, "viewer": operations.AccessRead} {
		id := st.Operator.Identities[name]
		tr, err := operatorclient.NewTransport(credentials.NewStaticCredentialsProvider(id.AccessKeyID, id.SecretAccessKey, id.SessionToken), st.Operator.Region, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := operatorclient.New(operatorclient.Config{ReadURL: st.Operator.ReadURL, ActURL: st.Operator.URL, HTTP: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		who, err := c.Whoami(ctx)
		if err != nil {
			t.Fatalf("whoami as %s: %v", name, err)
		}
		if !field.Check(t, "whoami as "+name,
			field.Eq("Access", who.Access, want),
			field.Eq("Operator", who.Operator, id.ARN),
			field.Eq("Verified", who.Verified, true),
		) {
			t.FailNow()
		}
		// A read on the endpoint of the identity's access, so that its
		// pool connects (checked below).
		readURL := st.Operator.ReadURL
		if want == operations.AccessAct {
			readURL = st.Operator.URL
		}
		c, err = operatorclient.New(operatorclient.Config{ReadURL: readURL, ActURL: st.Operator.URL, HTTP: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Stats(ctx, operations.StatsQuery{}); err != nil {
			t.Fatalf("stats as %s: %v", name, err)
		}
	}
	if resp, err := http.Get(st.Operator.ReadURL + "/v1/whoami"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an unsigned request to the operator API: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(out.String(), "operator API: "+st.Operator.URL+" (acting), "+st.Operator.ReadURL+" (read-only)") {
		t.Errorf("no operator API in the start-up lines:\n%s", out.String())
	}

	// sam local's env.json: this database and S3, as a container reaches
	// them, and the command that uses it on a port of its own.
	samEnv, err := os.ReadFile(samEnvFile)
	if err != nil {
		t.Fatalf("no env.json while running: %v", err)
	}
	dbPort := regexp.MustCompile(`:(\d+)/`).FindStringSubmatch(url)
	if dbPort == nil || !bytes.Contains(samEnv, []byte(`"DATABASE_URL": "postgres://`)) ||
		!bytes.Contains(samEnv, []byte("host.docker.internal:"+dbPort[1]+"/")) || !bytes.Contains(samEnv, []byte(`"S3_ENDPOINT": "http://host.docker.internal:`)) {
		t.Fatalf("env.json:\n%s", samEnv)
	}
	// The samples, compact: one send line per source, no curl.
	if s := out.String(); !strings.Contains(s, "go run ./cmd/webhookdev send stripe dev/samples/stripe.json --url "+m[1]+"\n") || strings.Contains(s, "curl -sS") {
		t.Errorf("the samples are not one send line per source:\n%s", s)
	}
	if !strings.Contains(out.String(), "sam local start-api --port 3001 --env-vars "+samEnvFile) {
		t.Errorf("no sam local command in the start-up lines:\n%s", out.String())
	}

	sources, _, _ := checkout.Sources(func(k string) string {
		if k == "WEBHOOK_SOURCES_FILE" {
			return filepath.Join("..", "..", "dev", "sources.json")
		}
		return ""
	})
	src, _ := sources.Lookup("stripe")
	req, err := sender.Sample(src, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := req.Post(ctx, http.DefaultClient, m[1])
	if err != nil || code != 200 || !bytes.Contains(body, []byte("accepted")) {
		t.Fatalf("sample: %d %s %v", code, body, err)
	}
	conn := owner
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var outcome string
		_ = conn.QueryRow(ctx, `SELECT coalesce(outcome, '') FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&outcome)
		return outcome == "handled", fmt.Sprintf("not processed: outcome=%q\n%s", outcome, out.String())
	})
	// Processed a poll interval (200 ms by default) after its receipt,
	// give or take the machine's load: the dev stack's processor is
	// always lingering. Both times are this machine's clock.
	var latency time.Duration
	if err := conn.QueryRow(ctx, `SELECT processed_at - created_at FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&latency); err != nil {
		t.Fatal(err)
	}
	t.Logf("receipt to processed under the dev stack: %s", latency)
	if latency > processor.DefaultPollInterval+1500*time.Millisecond {
		t.Errorf("the sample was processed %s after its receipt; the processor does not poll", latency)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var archived bool
		_ = conn.QueryRow(ctx, `SELECT archived_at IS NOT NULL FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&archived)
		return archived, fmt.Sprintf("not archived\n%s", out.String())
	})
	// A handler writing to a table no Schema declares fails under the
	// processor's role, as deployed, naming the privilege and the entry.
	gh, _ := sources.Lookup("github")
	ghReq, err := sender.Sample(gh, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := ghReq.Post(ctx, http.DefaultClient, m[1]); err != nil || code != 200 {
		t.Fatalf("github sample: %d %s %v", code, body, err)
	}
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var lastError string
		_ = conn.QueryRow(ctx, `SELECT coalesce(last_error, '') FROM webhook_events WHERE provider = 'github' AND event_id = $1`, ghReq.EventID).Scan(&lastError)
		return strings.Contains(lastError, "permission denied for table dev_undeclared (SQLSTATE 42501): the processor's database role lacks INSERT on it") &&
			strings.Contains(lastError, `processor.HandlerSchema Grants ("dev_undeclared": {"INSERT", ...}) and deploy (make dev applies it at start)`), "last_error = " + lastError
	})

	// A source added to the sources file is served without a restart: the
	// receiver reads the file again every couple of seconds.
	if !strings.Contains(out.String(), "sources ("+sourcesFile+", read again every 2s)") {
		t.Errorf("the start-up lines do not say the sources are read again:\n%s", out.String())
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.Unmarshal(devSources, &doc); err != nil {
		t.Fatal(err)
	}
	doc["sources"]["stripe-added"] = json.RawMessage(`{"kind":"stripe","secrets":["whsec_dev_added_0123456789abcdef"]}`)
	edited, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sourcesFile+".new", edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sourcesFile+".new", sourcesFile); err != nil {
		t.Fatal(err)
	}
	addedSet, err := source.Parse(edited)
	if err != nil {
		t.Fatal(err)
	}
	added, _ := addedSet.Lookup("stripe-added")
	poll.Until(t, 30*time.Second, func() (bool, string) {
		req, err := sender.Sample(added, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		code, body, err := req.Post(ctx, http.DefaultClient, m[1])
		return err == nil && code == 200 && bytes.Contains(body, []byte("accepted")), fmt.Sprintf("the added source: %d %s %v", code, body, err)
	})
	// Its event is processed and archived like any other.
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var archived bool
		_ = conn.QueryRow(ctx, `SELECT archived_at IS NOT NULL FROM webhook_events WHERE provider = 'stripe-added'`).Scan(&archived)
		return archived, fmt.Sprintf("the added source's event is not archived\n%s", out.String())
	})

	// Every component connected as its function's role.
	wantRoles := map[string]string{
		"webhook-inbox-receiver": "webhook_receiver", "webhook-inbox-processor": "webhook_processor", "webhook-inbox-archiver": "webhook_archiver",
		"webhook-inbox-operator": "webhook_operator", "webhook-inbox-operator-read": "webhook_operator_read",
	}
	rows, err := conn.Query(ctx, `SELECT DISTINCT application_name, usename::text FROM pg_stat_activity WHERE datname = current_database() AND application_name <> ''`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var app, user string
		if err := rows.Scan(&app, &user); err != nil {
			t.Fatal(err)
		}
		if _, ok := wantRoles[app]; ok {
			got[app] = user
		}
	}
	if rows.Err() != nil || fmt.Sprint(got) != fmt.Sprint(wantRoles) {
		t.Errorf("components connected as %v (%v), want %v", got, rows.Err(), wantRoles)
	}

	// A few idle archiver passes, which must print nothing.
	idle := passes.Load()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		return passes.Load() >= idle+3, fmt.Sprintf("%d idle archiver passes", passes.Load()-idle)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	if _, err := os.Stat(stackFile); !os.IsNotExist(err) {
		t.Errorf("the stack file outlived the stack: %v", err)
	}
	if _, err := os.Stat(samEnvFile); !os.IsNotExist(err) {
		t.Errorf("env.json outlived the stack: %v", err)
	}

	log := out.String()
	if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} INFO  webhook accepted source=stripe event_id=`).MatchString(log) {
		t.Errorf("no readable line for the accepted webhook:\n%s", log)
	}
	if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} INFO  processor: drained `).MatchString(log) ||
		!strings.Contains(log, "processor: polling every 200ms in runs of 1s back to back") {
		t.Errorf("no readable line for the processed webhook, or for how the processor runs:\n%s", log)
	}
	if strings.Contains(log, "_aws") || strings.Contains(log, `{"time"`) {
		t.Errorf("EMF or JSON in the dev stack's log:\n%s", log)
	}
	if n := strings.Count(log, "archive: run done"); n != 2 {
		t.Errorf("%d archiver run lines, want 2 (the passes that archived the sample and the added source's event; idle passes are quiet):\n%s", n, log)
	}
}

// TestDevStackRefusesADuplicateRoute: a route registered twice stops make
// dev's start with the one line naming both registrations, before the
// database is migrated (the database here could not even be reached).
func TestDevStackRefusesADuplicateRoute(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/nowhere?connect_timeout=1", "LOG_LEVEL": "error"}
	register := func(r *processor.Registry) {
		testhandler.Register(r, processor.Kind("stripe"), "invoice.paid")
		r.HandleFunc(processor.Kind("stripe"), "invoice.paid", func(context.Context, pgx.Tx, *processor.Event) error { return nil })
	}
	var out lockedBuffer
	err := devstack.Run(t.Context(), &out, devstack.Options{
		StackFile: filepath.Join(t.TempDir(), "devstack.json"), SamEnvFile: filepath.Join(t.TempDir(), "env.json"),
		RolesFile: filepath.Join(t.TempDir(), "roles.json"), Register: register, Getenv: func(k string) string { return env[k] },
	})
	want := regexp.MustCompile(`^processor: route kind stripe, type invoice\.paid registered twice: by internal/testkit/testhandler\.Register \(testhandler\.go:\d+\) and by internal/devstack_test\.TestDevStackRefusesADuplicateRoute\.func1 \(devstack_test\.go:\d+\)$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("err = %v, want one line matching %s\n%s", err, want, out.String())
	}
	if strings.Contains(out.String(), "schema:") {
		t.Fatalf("the schema was migrated before the routes were checked:\n%s", out.String())
	}
}
