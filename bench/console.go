package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// consoleBoundMs is the bound on a list page's server-side time (docs/operations.md).
const consoleBoundMs = 100

// ConsoleFigure is the console stage: its pages answered by the console's
// handler, in process (no network, no browser), over a database of
// Events stored events.
type ConsoleFigure struct {
	// Events, DeadLetters (open; RequeuedLetters already requeued) and
	// Actions are what the database holds; LoadSeconds how long loading
	// them took.
	Events          int     `json:"events"`
	DeadLetters     int     `json:"open_dead_letters"`
	RequeuedLetters int     `json:"requeued_dead_letters"`
	Actions         int     `json:"operator_actions"`
	LoadSeconds     float64 `json:"load_seconds"`
	// Requests is how many times each page was timed, after Warmup
	// untimed ones; BoundMs the bound.
	Requests int           `json:"requests_per_page"`
	Warmup   int           `json:"warmup_requests"`
	BoundMs  float64       `json:"bound_ms"`
	Pages    []ConsolePage `json:"pages"`
}

// ConsolePage is one page's server-side time.
type ConsolePage struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Status is the answer's (200, or 303 for a find that opens the
	// event), Bytes its size.
	Status int     `json:"status"`
	Bytes  int     `json:"bytes"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Within: the p99 is under the bound.
	Within bool `json:"within_bound"`
}

// Slowest is the page with the highest p99.
func (c *ConsoleFigure) Slowest() *ConsolePage {
	if c == nil || len(c.Pages) == 0 {
		return nil
	}
	s := &c.Pages[0]
	for i := range c.Pages {
		if c.Pages[i].P99Ms > s.P99Ms {
			s = &c.Pages[i]
		}
	}
	return s
}

// console loads ConsoleEvents events (the history stage's rows: processed
// and archived, over a year, three sources), one in a thousand dead with
// its open dead letter, one in a hundred with a dead letter requeued long
// ago, and ten thousand operator actions; then times each page of the
// console's handler, called in process with a logged-in session.
func (b *bench) console(ctx context.Context) error {
	t := target{b.env, dbConsole}
	fig := &ConsoleFigure{Events: b.s.ConsoleEvents, Requests: b.s.ConsoleRequests, Warmup: 5, BoundMs: consoleBoundMs}
	b.rep.Console = fig
	start := time.Now()
	if err := b.loadHistory(ctx, t, &HistoryFigure{Events: fig.Events}); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, t.URL())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", t.db, err)
	}
	defer pool.Close()
	for _, q := range consoleLoadSQL {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("load the console's rows: %w\n%s", err, q)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE requeued_at IS NULL), count(*) FILTER (WHERE requeued_at IS NOT NULL),
       (SELECT count(*) FROM webhook_operator_actions) FROM webhook_dead_letters`).Scan(&fig.DeadLetters, &fig.RequeuedLetters, &fig.Actions); err != nil {
		return err
	}
	fig.LoadSeconds = time.Since(start).Seconds()
	b.log.Info("console rows loaded", "events", fig.Events, "dead_letters", fig.DeadLetters, "actions", fig.Actions,
		"seconds", fmt.Sprintf("%.1f", fig.LoadSeconds))

	const token = "bench-console-token-0123456789-0123456789"
	// The console over the operations API on the database, as
	// webhookctl console serves it with a direct path.
	api, err := operations.New(operations.Config{Access: operations.AccessAct}, operations.Deps{Store: storage.New(pool)})
	if err != nil {
		return err
	}
	op := operations.Operator{Name: "bench"}
	id, err := api.Whoami(operations.WithOperator(ctx, op))
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{API: api, Identity: id, Operator: op, Token: token,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8080/?token="+token, nil))
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		return fmt.Errorf("console login: %d, no session cookie", rec.Code)
	}

	var mid struct {
		event, deadLetter, action int64
		day                       time.Time
		eventID                   string
	}
	if err := pool.QueryRow(ctx, `SELECT e.id, e.event_id, e.created_at FROM webhook_events e WHERE e.id = $1`, fig.Events/2+1).
		Scan(&mid.event, &mid.eventID, &mid.day); err != nil {
		return fmt.Errorf("the middle event: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT id FROM webhook_dead_letters WHERE requeued_at IS NULL ORDER BY id OFFSET $1 LIMIT 1), 0),
       coalesce((SELECT id FROM webhook_operator_actions ORDER BY id DESC OFFSET $2 LIMIT 1), 0)`, fig.DeadLetters/2, fig.Actions/2).
		Scan(&mid.deadLetter, &mid.action); err != nil {
		return fmt.Errorf("the middle dead letter and action: %w", err)
	}
	day := mid.day.UTC().Format(time.DateOnly)
	next := mid.day.UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	pages := []struct{ name, path string }{
		{"events, unfiltered", "/events"},
		{"events of one source (square, 1 in 10)", "/events?source=square"},
		{"events of one type (orders/paid)", "/events?type=" + url.QueryEscape("orders/paid")},
		{"events dead (1 in 1 000)", "/events?state=dead"},
		{"events received on one day", "/events?from=" + day + "&to=" + next},
		{"events, a deep page (cursor in the middle)", "/events?before=" + strconv.FormatInt(mid.event, 10)},
		{"find by the sender's id, no source", "/events?find=" + url.QueryEscape(mid.eventID)},
		{"one event (attempts, actions, dead letters)", "/events/" + strconv.FormatInt(mid.event, 10)},
		{"dead letters", "/dead-letters"},
		{"dead letters, a deep page", "/dead-letters?after=" + strconv.FormatInt(mid.deadLetter, 10)},
		{"operator actions", "/actions"},
		{"operator actions, a deep page", "/actions?before=" + strconv.FormatInt(mid.action, 10)},
		{"overview", "/"},
	}
	if err := b.timePages(ctx, c, cookies[0], fig, pages); err != nil {
		return err
	}
	return b.consoleSearch(ctx, pool, c, cookies[0], fig)
}

// consoleSearch times the events list's search by content (match=,
// header=), after the other pages (its rows change what they read): the
// newest consoleSearchRows events get a payload as the processor leaves
// one before the archiver runs (about 1 kB of JSON, stored out of line
// like a real one: a customer, a total, four order lines) and Shopify's
// their shop's domain in the metadata; the older ones stay archived,
// payload NULL. Each search walks the window newest first within the
// request's budget of rows and time (operations' search), so a page
// that finds nothing, or few, is the slowest.
func (b *bench) consoleSearch(ctx context.Context, pool *pgxpool.Pool, c http.Handler, cookie *http.Cookie, fig *ConsoleFigure) error {
	first := max(int64(fig.Events)-consoleSearchRows, 0)
	start := time.Now()
	if _, err := pool.Exec(ctx, consoleSearchSQL, first); err != nil {
		return fmt.Errorf("give the newest events their payload: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE webhook_events`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	b.log.Info("console search rows loaded", "events_with_payload", min(consoleSearchRows, fig.Events), "seconds", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	var rare string
	if err := pool.QueryRow(ctx, `SELECT event_id FROM webhook_events WHERE id = $1`, first+1).Scan(&rare); err != nil {
		return fmt.Errorf("the oldest event with a payload: %w", err)
	}
	year := "since=365d&"
	return b.timePages(ctx, c, cookie, fig, []struct{ name, path string }{
		{"search, the last day (the default window)", "/events?match=" + url.QueryEscape(`{"customer":"cus_000042"}`)},
		{"search a customer over the year (1 in 1 000)", "/events?" + year + "match=" + url.QueryEscape(`{"customer":"cus_000042"}`)},
		{"search an order line over the year (nested array, 1 in 500)", "/events?" + year + "match=" + url.QueryEscape(`{"data":{"lines":[{"sku":"sku_42"}]}}`)},
		{"search one event's id over the year (1 match, the budget spent)", "/events?" + year + "match=" + url.QueryEscape(`{"id":"`+rare+`"}`)},
		{"search that matches nothing over the year", "/events?" + year + "match=" + url.QueryEscape(`{"customer":"cus_nobody"}`)},
		{"search a kept header over the year (a shop, 1 in 50)", "/events?" + year + "header=" + url.QueryEscape("X-Shopify-Shop-Domain=shop-7.myshopify.com")},
	})
}

// consoleSearchRows is how many of the newest events the search pages find
// with a payload: more than one request's budget of rows.
const consoleSearchRows = 200_000

// consoleSearchSQL gives the events from id $1 on a payload (and
// Shopify's events their shop in the metadata), unarchived.
const consoleSearchSQL = `
UPDATE webhook_events SET
    payload = jsonb_build_object('id', event_id, 'type', event_type, 'created', extract(epoch FROM created_at)::bigint,
        'customer', 'cus_' || lpad((id % 1000)::text, 6, '0'), 'total', (id * 7919) % 3000, 'currency', 'eur',
        'data', jsonb_build_object('lines', (SELECT jsonb_agg(jsonb_build_object('sku', 'sku_' || ((id + k) % 2000), 'quantity', 1 + k,
            'description', md5((id + k)::text) || md5((id * k)::text) || md5((id - k)::text))) FROM generate_series(1, 4) AS k))),
    metadata = CASE WHEN provider = 'shopify' THEN jsonb_build_object('shopify_shop_domain', 'shop-' || (id % 50) || '.myshopify.com') END,
    archive_key = NULL, archive_offset = NULL, archive_length = NULL, archived_at = NULL
 WHERE id > $1 AND dead_at IS NULL`

// timePages times each page: Warmup untimed requests, then Requests timed
// ones, one after another.
func (b *bench) timePages(ctx context.Context, c http.Handler, cookie *http.Cookie, fig *ConsoleFigure, pages []struct{ name, path string }) error {
	for _, p := range pages {
		page := ConsolePage{Name: p.name, Path: p.path}
		times := make([]time.Duration, 0, fig.Requests)
		for i := range fig.Warmup + fig.Requests {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:8080"+p.path, nil)
			req.AddCookie(cookie)
			rec := httptest.NewRecorder()
			began := time.Now()
			c.ServeHTTP(rec, req)
			took := time.Since(began)
			if rec.Code != http.StatusOK && rec.Code != http.StatusSeeOther {
				return fmt.Errorf("console page %s: %d\n%s", p.path, rec.Code, rec.Body.String())
			}
			page.Status, page.Bytes = rec.Code, rec.Body.Len()
			if i >= fig.Warmup {
				times = append(times, took)
			}
		}
		slices.Sort(times)
		page.P50Ms, page.P99Ms, page.MaxMs = percentile(times, 50), percentile(times, 99), percentile(times, 100)
		page.Within = page.P99Ms < fig.BoundMs
		fig.Pages = append(fig.Pages, page)
		b.log.Info("console page", "page", p.name, "p50_ms", fmt.Sprintf("%.2f", page.P50Ms), "p99_ms", fmt.Sprintf("%.2f", page.P99Ms))
	}
	return nil
}

// consoleLoadSQL turns the loaded history into what a console shows: one
// event in a thousand dead (never processed, its last error kept) with
// its open dead letter, one in a hundred (of the others) with a dead
// letter requeued an hour after it died, and ten thousand operator
// actions; then VACUUM ANALYZE.
var consoleLoadSQL = []string{
	`UPDATE webhook_events SET processed_at = NULL, outcome = NULL, archive_key = NULL, archive_offset = NULL, archive_length = NULL,
        archived_at = NULL, attempts = 3, dead_at = created_at + interval '1 minute',
        last_error = 'handler: the downstream API answered 503'
  WHERE id % 1000 = 0`,
	`INSERT INTO webhook_dead_letters (event_pk, provider, event_id, event_type, attempts, last_error, dead_at)
SELECT id, provider, event_id, event_type, 3, last_error, dead_at FROM webhook_events WHERE dead_at IS NOT NULL ORDER BY id`,
	`INSERT INTO webhook_dead_letters (event_pk, provider, event_id, event_type, attempts, last_error, dead_at, requeued_at)
SELECT id, provider, event_id, event_type, 3, 'handler: timeout', created_at + interval '1 minute', created_at + interval '61 minutes'
  FROM webhook_events WHERE id % 100 = 1 ORDER BY id`,
	`INSERT INTO webhook_operator_actions (action, actor, at, filter, events, reason)
SELECT (ARRAY['replay', 'requeue', 'expunge'])[1 + i % 3], 'ops' || (i % 7) || '@bench', now() - make_interval(mins => 10000 - i),
       jsonb_build_object('source', 'stripe', 'event_type', 'invoice.paid'), 1 + i % 50, 'INC-' || i
  FROM generate_series(1, 10000) AS i`,
	`VACUUM ANALYZE`,
}
