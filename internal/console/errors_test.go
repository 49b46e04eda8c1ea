package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// refusingAPI is an operations.API whose overview, dead letters and
// requeue fail with err: what any API (a database down, the operator
// function refusing) may answer. Its dead letters page lists one, so that
// the page carries a requeue form.
type refusingAPI struct {
	operations.API
	err error
}

func (a refusingAPI) Stats(context.Context, operations.StatsQuery) (*operations.Stats, error) {
	return nil, a.err
}

func (a refusingAPI) DeadLetters(context.Context, operations.DeadLetterQuery) (*operations.DeadLetterPage, error) {
	return &operations.DeadLetterPage{At: time.Now(), DeadLetters: []operations.DeadLetter{{ID: 1, EventPK: 1, Source: "stripe", DeadAt: time.Now()}}}, nil
}

func (a refusingAPI) Requeue(context.Context, operations.RequeueRequest) (*operations.RequeueResult, error) {
	return nil, a.err
}

// logBuffer collects a logger's JSON lines, safe for the server's
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the records logged, decoded.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestErrorsAnsweredThroughTheTable: an error from the API, of every
// status class, is answered as the message page with the status of the
// operator API's one table (operatorapi.StatusOf), for a page and for an
// action alike; a 5xx is logged as an error with what went wrong, and
// shows nothing of it (a bug's text stays in the log); a refusal is
// logged as a warning with its cause.
func TestErrorsAnsweredThroughTheTable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		shown  string
	}{
		{inbox.Errorf(inbox.CauseInvalidArgument, "the window must be positive"), http.StatusBadRequest, "the window must be positive"},
		{inbox.Errorf(inbox.CauseReadOnly, "this operator API is read-only"), http.StatusForbidden, "this operator API is read-only"},
		{inbox.Errorf(inbox.CauseForbidden, "the identity lacks OperatorReadPolicy"), http.StatusForbidden, "the identity lacks OperatorReadPolicy"},
		{inbox.Errorf(inbox.CauseEventNotFound, "no such event (id 7)"), http.StatusNotFound, "no such event (id 7)"},
		{inbox.Errorf(inbox.CauseCountChanged, "the requeue now selects 3 events"), http.StatusConflict, "the requeue now selects 3 events"},
		{inbox.Errorf(inbox.CauseEventExpunged, "the body of event 7 was expunged"), http.StatusGone, "the body of event 7 was expunged"},
		{inbox.WrapError(inbox.CauseDatabaseUnavailable, errors.New("dial tcp: connection refused"), "the database is unavailable"),
			http.StatusServiceUnavailable, "the database is unavailable"},
		{inbox.Errorf(inbox.CauseArchiveNotConfigured, "an expunge needs ARCHIVE_BUCKET"), http.StatusServiceUnavailable, "an expunge needs ARCHIVE_BUCKET"},
		{inbox.WrapError(inbox.CauseArchiveStoreFailed, errors.New("AccessDenied"), "the archive's bucket refused"), http.StatusBadGateway, "the archive's bucket refused"},
		{inbox.WrapError(inbox.CauseInternal, errors.New(`SELECT secret FROM "x"`), "the request failed"), http.StatusInternalServerError,
			"internal error: the console's log has the details"},
		// An error without a cause is a bug: 500, its text in the log only.
		{errors.New("a bug's text"), http.StatusInternalServerError, "internal error: the console's log has the details"},
	} {
		cause, name := inbox.CauseOf(c.err), string(inbox.CauseOf(c.err))
		if _, ok := errors.AsType[*inbox.Error](c.err); !ok {
			name = "no cause"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := operatorapi.StatusOf(c.err); got != c.status {
				t.Fatalf("the table says %d for %s, the test %d", got, cause, c.status)
			}
			logs := &logBuffer{}
			f := serve(t, nil, refusingAPI{err: c.err}, func(cfg *console.Config) {
				cfg.Identity = &operations.Identity{Operator: "alice@ops", Access: operations.AccessAct}
				cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			})
			f.loginAt("/dead-letters")
			shown := template.HTMLEscapeString(c.shown)
			code, page := f.get("/")
			if code != c.status || !strings.Contains(page, `<p class="message">`+shown+`</p>`) || !strings.Contains(page, "<h1>"+http.StatusText(c.status)+"</h1>") {
				t.Errorf("overview = %d, want %d and the message page saying %q\n%s", code, c.status, c.shown, page)
			}
			_, page = f.get("/dead-letters")
			code, page = f.post("/dead-letters/requeue", url.Values{"csrf": {f.csrf(page)}, "all": {"1"}}, nil)
			if code != c.status || !strings.Contains(page, `<p class="message">`+shown+`</p>`) {
				t.Errorf("requeue = %d, want %d and the message page saying %q\n%s", code, c.status, c.shown, page)
			}
			for _, leak := range []string{"SELECT secret", "a bug&#39;s text", "connection refused", "AccessDenied"} {
				if strings.Contains(page, leak) {
					t.Errorf("the page shows the wrapped error's %q", leak)
				}
			}
			var logged int
			for _, l := range logs.lines(t) {
				if l["path"] == nil || l["status"] != float64(c.status) {
					continue
				}
				logged++
				wantLevel := "WARN"
				if c.status >= 500 {
					wantLevel = "ERROR"
				}
				if msg, _ := l["err"].(string); l["level"] != wantLevel || l["cause"] != string(cause) || !strings.Contains(msg, c.err.Error()) {
					t.Errorf("logged %v, want level %s, cause %s and the error", l, wantLevel, cause)
				}
			}
			if logged != 2 {
				t.Errorf("%d log lines for the two errors answered, want 2", logged)
			}
		})
	}
}

// loginAt opens path with the token, as login opens the overview.
func (f *fixture) loginAt(path string) {
	f.t.Helper()
	if code, body := f.get(path + "?token=" + testToken); code != http.StatusOK {
		f.t.Fatalf("login = %d\n%s", code, body)
	}
}

// TestRefusalsBeforeASessionShowNothing: a request without a session, or
// posted from another origin, is refused with one line of text, through
// the same table (401, 403), and nothing of the console (its layout, who
// acts) is shown.
func TestRefusalsBeforeASessionShowNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	for name, c := range map[string]struct {
		do     func() (int, string)
		status int
		says   string
	}{
		"no session":  {func() (int, string) { return f.get("/events") }, http.StatusUnauthorized, "open the address `webhookctl console` printed at start"},
		"wrong token": {func() (int, string) { return f.get("/events?token=wrong-token-0123456789") }, http.StatusUnauthorized, "open the address `webhookctl console` printed at start"},
		"cross-origin": {func() (int, string) {
			return f.post("/dead-letters/requeue", url.Values{"all": {"1"}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
		}, http.StatusForbidden, "cross-origin request refused"},
	} {
		code, body := c.do()
		if code != c.status || !strings.Contains(body, c.says) || strings.Contains(body, "<") || strings.Contains(body, "alice") {
			t.Errorf("%s = %d %q, want %d, one line saying %q", name, code, body, c.status, c.says)
		}
	}
}

// TestReadOnlyByIdentity: an API that lets the operator only read (its
// Whoami says access read) makes the console read-only without
// --read-only: the pages offer no action, every action is refused (403)
// and nothing changes.
func TestReadOnlyByIdentity(t *testing.T) {
	t.Parallel()
	store := storage.New(pgtest.Pool(t))
	api, err := operations.New(operations.Config{Access: operations.AccessRead}, operations.Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, store, api, nil)
	_, dl := f.deadLetter("stripe", "invoice.paid")
	done := factory.Event(f.ctx, t, store, &factory.EventOpts{EventID: "evt_read_only", State: inbox.StateProcessed}).ID
	f.login()
	for _, p := range []string{"/", "/dead-letters", "/events", "/events/" + itoa(done)} {
		code, page := f.get(p)
		if code != http.StatusOK || strings.Contains(page, `method="post"`) || !strings.Contains(page, `<span class="who">read-only</span>`) {
			t.Errorf("%s = %d, want a read-only page without actions\n%s", p, code, page)
		}
	}
	for path, form := range map[string]url.Values{
		"/dead-letters/requeue":              {"id": {itoa(dl)}, "confirm": {"yes"}, "count": {"1"}},
		"/events/replay":                     {"id": {itoa(done)}, "confirm": {"yes"}, "count": {"1"}},
		"/events/" + itoa(done) + "/expunge": {"confirm_event_id": {"evt_read_only"}},
	} {
		if code, body := f.post(path, form, nil); code != http.StatusForbidden || !strings.Contains(body, "read-only") ||
			!strings.Contains(body, "only read") {
			t.Errorf("POST %s = %d, want 403 saying the API lets the operator only read\n%s", path, code, body)
		}
	}
	if n, _ := f.store.DeadLetterCountRequeueable(f.ctx, storage.DeadLetterFilter{All: true}); n != 1 {
		t.Errorf("open dead letters = %d after refused actions, want 1", n)
	}
	if e, _ := f.store.EventGetByID(f.ctx, done); e.ProcessedAt == nil || e.ExpungedAt != nil {
		t.Errorf("a read-only console changed the event: %+v", e)
	}
}

// TestLayoutSaysWhoActs: the layout says whom actions are recorded as,
// and that AWS IAM verified it when it did.
func TestLayoutSaysWhoActs(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:sts::123456789012:assumed-role/Operators/alice"
	for _, c := range []struct {
		id   *operations.Identity
		says string
	}{
		{&operations.Identity{Operator: "alice@ops", Access: operations.AccessAct}, `<span class="who">acting as alice@ops</span>`},
		{&operations.Identity{Operator: arn, Verified: true, Access: operations.AccessAct}, `<span class="who">acting as ` + arn + ` (verified by AWS IAM)</span>`},
		{&operations.Identity{Operator: arn, Verified: true, Access: operations.AccessRead}, `<span class="who">read-only, signed in as ` + arn + ` (verified by AWS IAM)</span>`},
	} {
		f := setup(t, func(cfg *console.Config) { cfg.Identity = c.id })
		f.login()
		if _, page := f.get("/actions"); !strings.Contains(page, c.says) {
			t.Errorf("identity %+v: the layout lacks %s\n%s", c.id, c.says, page)
		}
	}
}

// TestNewRefusesAnIncompleteConfig: the console needs an API, a long
// token, a window the API takes, and someone to act as unless it is
// read-only.
func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	api := refusingAPI{}
	ok := console.Config{API: api, Token: testToken, Operator: operations.Operator{Name: "alice"}}
	if _, err := console.New(ok); err != nil {
		t.Fatalf("a complete config: %v", err)
	}
	for name, edit := range map[string]func(*console.Config){
		"no API":            func(c *console.Config) { c.API = nil },
		"a short token":     func(c *console.Config) { c.Token = "short" },
		"a window too long": func(c *console.Config) { c.Window = operations.MaxWindow + 1 },
		"nobody acting":     func(c *console.Config) { c.Operator = operations.Operator{} },
	} {
		cfg := ok
		edit(&cfg)
		if _, err := console.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	ro := ok
	ro.ReadOnly, ro.Operator = true, operations.Operator{}
	if _, err := console.New(ro); err != nil {
		t.Errorf("a read-only console needs nobody to act: %v", err)
	}
}
