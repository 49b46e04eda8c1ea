package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
)

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

// TestDevStack runs `webhookdev dev` as make dev does (on DATABASE_URL, a
// local S3, a short archive age): a sample is accepted, processed by the
// deployed handlers, archived to S3, and Ctrl-C stops everything cleanly.
func TestDevStack(t *testing.T) {
	url := pgtest.URL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, &out, devOptions{addr: "127.0.0.1:0", s3Dir: t.TempDir(), archiveAge: time.Millisecond, archiveEvery: 200 * time.Millisecond})
	}()
	base := regexp.MustCompile(`receiver: (http://[0-9.:]+)/webhooks`)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); m == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the dev stack did not start:\n%s", out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("dev stopped: %v\n%s", err, out.String())
		default:
		}
		m = base.FindStringSubmatch(out.String())
	}
	sources, _, _ := devenv.Sources(os.Getenv)
	src, _ := sources.Lookup("stripe")
	req, err := sender.Sample(src, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := req.Post(ctx, http.DefaultClient, m[1])
	if err != nil || code != 200 || !bytes.Contains(body, []byte("accepted")) {
		t.Fatalf("sample: %d %s %v", code, body, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var outcome string
	var archived bool
	for deadline := time.Now().Add(30 * time.Second); !(outcome == "handled" && archived); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not processed and archived: outcome=%q archived=%v\n%s", outcome, archived, out.String())
		}
		_ = conn.QueryRow(ctx, `SELECT coalesce(outcome, ''), archived_at IS NOT NULL FROM webhook_events WHERE event_id = $1`, req.EventID).Scan(&outcome, &archived)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
}
