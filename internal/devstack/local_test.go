package devstack_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/pinnedtools"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// TestLocalServesTheDeployedWiring runs make local (RunLocal) in the
// economy profile, on a database of its own (the migration sets the
// roles' passwords, which belong to the whole server): its lines say how
// the functions are woken, a signed webhook through its API is handled by
// the processor that the receiver's wake/now/ marker woke through the
// local EventBridge, and Ctrl-C stops it, each function's init duration
// said.
func TestLocalServesTheDeployedWiring(t *testing.T) {
	tier.Heavy(t, "builds the Lambda binaries and runs make local")
	t.Parallel()
	dbURL := pgtest.EmptyURL(t, pgtest.Cluster(t, pgtest.Passwords()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- devstack.RunLocal(ctx, &out, devstack.LocalOptions{
			Addr: "127.0.0.1:0", S3Dir: t.TempDir(), LambdaDir: t.TempDir(), ArchiveAge: time.Minute,
			Profile: "economy", FireEvery: 100 * time.Millisecond,
			Getenv: func(k string) string { return map[string]string{"DATABASE_URL": dbURL}[k] },
		})
	}()
	api := regexp.MustCompile(`api: (http://[0-9.:]+)/webhooks`)
	var m []string
	poll.Until(t, 120*time.Second, func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("make local stopped: %v\n%s", err, out.String())
		default:
		}
		s := out.String()
		m = api.FindStringSubmatch(s)
		return m != nil && strings.Contains(s, "Ctrl-C stops everything."), "make local did not start:\n" + s
	})
	for _, want := range []string{
		"SourcesCopy: copied version", "DatabaseSchema: schema at version",
		"lambda: MigrationFrontFunction running", "lambda: RelayFunction running",
		"wake: ReceiverFunction -> an empty wake/now/ object in", "-> RelayFunction -> one-time schedules in the local EventBridge Scheduler",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the start-up lines:\n%s", want, out.String())
		}
	}

	root, err := pinnedtools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	set, err := source.Load(func(k string) string {
		if k == source.EnvSourcesFile {
			return filepath.Join(root, checkout.SourcesFile)
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	github, _ := set.Lookup("github")
	req, err := sender.Sample(github, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := req.Post(ctx, http.DefaultClient, m[1]); err != nil || code != 200 || !strings.Contains(string(body), "accepted") {
		t.Fatalf("a delivery: %d %s %v", code, body, err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var processed bool
		_ = conn.QueryRow(ctx, `SELECT processed_at IS NOT NULL FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&processed)
		return processed, fmt.Sprintf("%s not processed:\n%s", req.EventID, out.String())
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("make local ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("make local did not stop")
	}
	if !strings.Contains(out.String(), "lambda: ProcessorFunction init duration") {
		t.Errorf("no init duration of the processor:\n%s", out.String())
	}
}
