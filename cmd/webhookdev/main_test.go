package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) {
	if os.Getenv(postgresChildEnv) != "" {
		os.Exit(postgresChild())
	}
	// The commands default to dev/sources.json, relative to the repository.
	if err := os.Chdir(filepath.Join("..", "..")); err != nil {
		panic(err)
	}
	pgtest.Main(m)
}

// run executes webhookdev with args and returns its output.
func run(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if stdin != nil {
		cmd.SetIn(stdin)
	}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// devReceiver serves the dev sources on a fresh database, like make dev.
func devReceiver(t *testing.T) (*httptest.Server, *storage.Store) {
	t.Helper()
	sources, _, err := checkout.Sources(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	store := storage.New(pgtest.Pool(t))
	h, err := receiver.New(receiver.Config{}, receiver.Deps{Sources: sources, Store: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, store
}

func TestSendAcceptedThenDuplicate(t *testing.T) {
	srv, _ := devReceiver(t)
	body := `{"id":"evt_cli_1","object":"event","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`
	out, err := run(t, strings.NewReader(body), "send", "stripe", "-", "--url", srv.URL)
	if err != nil || !strings.Contains(out, `"status":"accepted"`) {
		t.Fatalf("first send: %v\n%s", err, out)
	}
	out, err = run(t, strings.NewReader(body), "send", "stripe", "-", "--url", srv.URL)
	if err != nil || !strings.Contains(out, `"status":"duplicate"`) {
		t.Fatalf("second send: %v\n%s", err, out)
	}
	// A header-id kind: the same --id is the same event.
	for i, want := range []string{"accepted", "duplicate"} {
		out, err = run(t, strings.NewReader(`{"action":"opened"}`), "send", "github", "-", "--id", "d2f3a1b0-0000-4000-8000-000000000001", "--type", "issues", "--url", srv.URL, "--json")
		var res struct {
			Status int `json:"status"`
			Answer struct {
				Status string `json:"status"`
			} `json:"answer"`
		}
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Status != 200 || res.Answer.Status != want {
			t.Fatalf("github send %d: %v\n%s", i, err, out)
		}
	}
}

func TestSendRefusedIsAnError(t *testing.T) {
	srv, _ := devReceiver(t)
	_, err := run(t, strings.NewReader(`{"no":"id"}`), "send", "stripe", "-", "--url", srv.URL)
	if err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("send of an event without id: %v", err)
	}
	if _, err := run(t, strings.NewReader(`{}`), "send", "nope", "-", "--url", srv.URL); err == nil {
		t.Fatal("send to an unknown source succeeded")
	}
}

// A sample of a sender that signs no timestamp never expires: with secrets
// other than dev/sources.json's fake ones it is refused unless
// --replayable; a timestamped kind, or the dev file, prints as before.
func TestSampleWithRealSecretsOfAnUntimedKind(t *testing.T) {
	out, err := run(t, nil, "sample", "github")
	if err != nil || !strings.Contains(out, "curl") {
		t.Fatalf("dev file, github: %v\n%s", err, out)
	}
	t.Setenv("WEBHOOK_SOURCES", `{"sources":{
	 "gh":{"kind":"github","secrets":["a-production-github-secret"]},
	 "pay":{"kind":"stripe","secrets":["whsec_a_production_stripe_secret_0123"]}}}`)
	_, err = run(t, nil, "sample", "gh")
	if err == nil || !strings.Contains(err.Error(), "signs no timestamp") || !strings.Contains(err.Error(), "--replayable") ||
		strings.Contains(err.Error(), "a-production-github-secret") {
		t.Fatalf("real secret, github: %v, want a refusal naming --replayable", err)
	}
	if out, err := run(t, nil, "sample", "gh", "--replayable"); err != nil || !strings.Contains(out, "X-Hub-Signature-256") {
		t.Fatalf("--replayable: %v\n%s", err, out)
	}
	if out, err := run(t, nil, "sample", "pay"); err != nil || !strings.Contains(out, "Stripe-Signature") {
		t.Fatalf("a timestamped kind: %v\n%s", err, out)
	}
}
