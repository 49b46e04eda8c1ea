package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/poll"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/lambdahttp"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// logLines is a log's output, read while the loop writing it runs.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is how many lines carry msg.
func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), `"msg":"`+msg+`"`)
}

// stopped waits for done after ctx's cancel, failing if the loop holds on.
func stopped(t *testing.T, cancel context.CancelFunc, done <-chan error) error {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not stop with its context")
		return nil
	}
}

// TestServeProcessor: make dev's processor runs the function's
// invocations back to back, each with its own metrics line, handling the
// events as they come; with RunFor 0 it drains at once; either way it
// stops with its context. Without RunFor nor a schedule period it refuses
// to start rather than spin.
func TestServeProcessor(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]processor.Config{
		"runs of RunFor": {RunFor: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond},
		"one drain each": {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t)
			store := storage.New(pool)
			for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
				factory.Event(t.Context(), t, store, &factory.EventOpts{Source: "ledger", Type: "t", EventID: id})
			}
			reg := processor.NewRegistry()
			reg.HandleFunc(processor.Source("ledger"), processor.AnyType, func(context.Context, pgx.Tx, *processor.Event) error { return nil })
			var logs logLines
			p, err := processor.New(cfg, processor.Deps{Pool: pool, Registry: reg, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- serveProcessor(ctx, p, cfg.WithDefaults(), time.Minute, slog.New(slog.DiscardHandler)) }()
			handled := func() int {
				var n int
				_ = pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE outcome = 'handled'`).Scan(&n)
				return n
			}
			poll.Until(t, 30*time.Second, func() (bool, string) {
				n := handled()
				return n == 3, fmt.Sprintf("%d events handled, want 3", n)
			})
			if cfg.RunFor > 0 {
				// Invocation after invocation, each summed up by its line,
				// and an event that comes later is handled by a later one.
				poll.Until(t, 30*time.Second, func() (bool, string) {
					return logs.count("processor: run metrics") >= 3, "fewer than 3 runs summed up"
				})
				factory.Event(t.Context(), t, store, &factory.EventOpts{Source: "ledger", Type: "t", EventID: "evt_4"})
				poll.Until(t, 30*time.Second, func() (bool, string) { return handled() == 4, "the later event is not handled" })
			}
			if err := stopped(t, cancel, done); err != nil {
				t.Fatalf("serveProcessor returned %v", err)
			}
		})
	}
	p, err := processor.New(processor.Config{}, processor.Deps{Pool: pgtest.Pool(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := serveProcessor(t.Context(), p, processor.Config{}.WithDefaults(), 0, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("serveProcessor without RunFor nor a schedule period accepted")
	}
}

// TestArchiveEvery: make dev's archiver runs at once, then every interval,
// archiving what is old enough, until its context is done.
func TestArchiveEvery(t *testing.T) {
	tier.Heavy(t, "the archiver's loop runs on a real ticker, and the archive needs its own S3 server")
	t.Parallel()
	pool := pgtest.Pool(t)
	store := storage.New(pool)
	ev := factory.Event(t.Context(), t, store, &factory.EventOpts{Source: "a", EventID: "e1", Body: []byte(`{}`),
		State: inbox.StateProcessed, Now: time.Now().Add(-2 * time.Hour)})
	blobs := s3test.Open(t, s3test.Bucket(t, s3test.Server(t)))
	var logs logLines
	a, err := archive.New(archive.Config{Prefix: "archive", MinAge: time.Hour}, archive.Deps{Store: store, Blobs: blobs, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { archiveEvery(ctx, a, 10*time.Millisecond); done <- nil }()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		var archived bool
		_ = pool.QueryRow(t.Context(), `SELECT archived_at IS NOT NULL FROM webhook_events WHERE id = $1`, ev.ID).Scan(&archived)
		return archived && logs.count("archive: run done") >= 3, "not archived, or fewer than 3 runs"
	})
	stopped(t, cancel, done)
}

// receiverErrors is the receiver as its Lambda builds it, for what it
// answers on the handler's behalf (WriteError).
func receiverErrors(t *testing.T) *receiver.Handler {
	t.Helper()
	set, err := source.Parse([]byte(`{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_devstack_test_0123456789a"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := receiver.New(receiver.Config{}, receiver.Deps{Sources: set, Store: storage.New(pgtest.Pool(t)), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// serveLambda serves h through asLambda on the dev stack's server and
// returns its base URL.
func serveLambda(t *testing.T, h http.Handler, ew lambdahttp.ErrorWriter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(asLambda(h, ew), Timeouts{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestReceiverPanicAnswersAsItsLambda: a panic in the receiver under make
// dev gets the very answer its Lambda gives (the receiver's 503, cause
// internal), with nothing of what it wrote before.
func TestReceiverPanicAnswersAsItsLambda(t *testing.T) {
	t.Parallel()
	ew := receiverErrors(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Partial", "yes")
		_, _ = io.WriteString(w, "partial")
		panic(errors.New("boom"))
	})
	base := serveLambda(t, h, ew)
	resp, err := http.Post(base+"/webhooks/stripe", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	ev, err := lambdalocal.NewEvent(httpRequest(t, "/webhooks/stripe", `{}`), "$default")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lambdahttp.Handler(h, ew)(t.Context(), ev)
	field.Check(t, "answer to a panic",
		field.Eq("StatusCode", resp.StatusCode, want.StatusCode),
		field.Eq("StatusCode", resp.StatusCode, http.StatusServiceUnavailable),
		field.Eq("Body", string(body), want.Body),
		field.Eq("Content-Type", resp.Header.Get("Content-Type"), want.Headers["Content-Type"]),
		field.Eq("Retry-After", resp.Header.Get("Retry-After"), want.Headers["Retry-After"]),
		field.Eq("X-Partial", resp.Header.Get("X-Partial"), ""),
	)
}

// httpRequest is a request as the dev stack's server hands it over.
func httpRequest(t *testing.T, path, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "127.0.0.1:1234"
	return r
}

// TestReceiverSeesTheRequestAsDeployed: what the handler is given and what
// it answers cross the Lambda's event and response unchanged (path, query,
// headers, binary body; status, headers, cookies, body), and a body over
// API Gateway's limit gets API Gateway's answer without the handler.
func TestReceiverSeesTheRequestAsDeployed(t *testing.T) {
	t.Parallel()
	binary := []byte{0, 0xff, 'a', 0x80, '\n'}
	// What the handler was given, read once its answer is back.
	var (
		got *http.Request
		in  []byte
		ran atomic.Bool
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		in, _ = io.ReadAll(r.Body)
		ran.Store(true) // after what it publishes
		w.Header().Set("X-Kept", "1")
		http.SetCookie(w, &http.Cookie{Name: "c", Value: "v"})
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(binary)
	})
	base := serveLambda(t, h, receiverErrors(t))
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/stripe/tok?x=1&y=2", bytes.NewReader(binary))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", "t=1,v1=abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !ran.Load() {
		t.Fatal("the handler never ran")
	}
	field.Check(t, "request and answer",
		field.Eq("path", got.URL.Path, "/webhooks/stripe/tok"),
		field.Eq("query", got.URL.RawQuery, "x=1&y=2"),
		field.Eq("Stripe-Signature", got.Header.Get("Stripe-Signature"), "t=1,v1=abc"),
		field.Eq("request body", string(in), string(binary)),
		field.Eq("request id", lambdahttp.RequestID(got) != "", true),
		field.Eq("StatusCode", resp.StatusCode, http.StatusAccepted),
		field.Eq("X-Kept", resp.Header.Get("X-Kept"), "1"),
		field.Eq("Set-Cookie", resp.Header.Get("Set-Cookie"), "c=v"),
		field.Eq("response body", string(out), string(binary)),
	)

	ran.Store(false)
	resp, err = http.Post(base+"/webhooks/stripe", "application/json", bytes.NewReader(make([]byte, 10<<20+1)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	field.Check(t, "a body over API Gateway's limit",
		field.Eq("StatusCode", resp.StatusCode, http.StatusRequestEntityTooLarge),
		field.Eq("body", string(out), lambdalocal.TooLarge.Body),
		field.Eq("handler ran", ran.Load(), false),
	)
}
