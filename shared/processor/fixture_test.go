package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as a processor to kill.
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	pgtest.Main(m)
}

// clock is the processor's clock in tests (processor.Deps.Clock): tests
// move it instead of sleeping. Its waits (After) pass at once, moving the
// clock by their length, unless the test takes them over (waits).
type clock struct {
	*testclock.Clock
	mu    sync.Mutex
	waits waits
}

// newClock starts a minute ahead of the wall clock: events get their
// next_attempt_at from the server's now() on insert, and must be due.
// Postgres keeps microseconds, so the clock has no finer digits.
func newClock() *clock {
	return &clock{Clock: testclock.At(time.Now().Add(time.Minute).Truncate(time.Millisecond))}
}

// After is the processor's wait: handed to the test when it took the
// waits over, else over at once, the clock moved by d.
func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	w := c.waits
	c.mu.Unlock()
	if w != nil {
		return w.after(d)
	}
	return c.Clock.After(d)
}

// takeWaits hands every later wait of the clock to the test, which ends
// each (wait.done) when it chooses.
func (c *clock) takeWaits() waits {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = make(waits)
	return c.waits
}

// waits are the waits a processor asks its clock for, one at a time.
type waits chan wait

type wait struct {
	d   time.Duration
	end chan time.Time
}

func (w waits) after(d time.Duration) <-chan time.Time {
	end := make(chan time.Time, 1)
	w <- wait{d: d, end: end}
	return end
}

// done ends the wait: the processor goes on.
func (w wait) done() { w.end <- time.Time{} }

// wallClock is the real time, for the tests that need the wall clock
// (a database outage, the real-time test).
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// logBuffer collects JSON log lines safely from concurrent processors.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the decoded log lines whose msg contains substr.
func (b *logBuffer) lines(t *testing.T, substr string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line is not JSON: %s", l)
		}
		if msg, _ := m["msg"].(string); strings.Contains(msg, substr) {
			out = append(out, m)
		}
	}
	return out
}

type fixture struct {
	t     testing.TB
	ctx   context.Context
	pool  *pgxpool.Pool
	store *storage.Store
	clock *clock
	reg   *processor.Registry
	logs  *logBuffer
}

// ledgerDDL is the test's business table: one row per application of an
// event. No unique constraint, so that a second application would show
// up as a duplicate instead of failing.
const ledgerDDL = `CREATE TABLE ledger (event_pk BIGINT NOT NULL, attempt INT NOT NULL, note TEXT)`

// setup gives each test its own migrated database with a ledger table, a
// clock and an empty registry.
func setup(t *testing.T) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	return setupOn(t, pool)
}

func setupOn(t testing.TB, pool *pgxpool.Pool) *fixture {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	return &fixture{
		t: t, ctx: ctx, pool: pool, store: storage.New(pool),
		clock: newClock(), reg: processor.NewRegistry(), logs: &logBuffer{},
	}
}

// sourceKinds is the name→kind map of the tests' sources document.
var sourceKinds = map[string]string{"stripe": "stripe", "billing": "standard", "ledger": "test"}

// processor builds a processor of cfg on the fixture's pool, registry,
// clock and logs; zero fields of cfg take the package's defaults.
func (f *fixture) processor(cfg processor.Config) *processor.Processor {
	f.t.Helper()
	return f.processorOn(cfg, processor.Deps{})
}

// processorOn is processor with deps: their zero fields take the
// fixture's.
func (f *fixture) processorOn(cfg processor.Config, deps processor.Deps) *processor.Processor {
	f.t.Helper()
	if deps.Pool == nil {
		deps.Pool = f.pool
	}
	if deps.Registry == nil {
		deps.Registry = f.reg
	}
	if deps.Clock == nil {
		deps.Clock = f.clock
	}
	if deps.Rand == nil {
		deps.Rand = func() float64 { return 0.5 }
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.SourceKinds == nil {
		cfg.SourceKinds = sourceKinds
	}
	p, err := processor.New(cfg, deps)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// insert stores n due events of source and type, ids prefix00001...,
// and returns their primary keys in order.
func (f *fixture) insert(source, eventType, prefix string, n int) []int64 {
	f.t.Helper()
	evs := factory.Events(f.ctx, f.t, f.store, n, &factory.EventOpts{Source: source, Type: eventType, EventID: prefix})
	ids := make([]int64, n)
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// insertOne stores one event with this body through the receiver's query.
func (f *fixture) insertOne(source, eventID, eventType string, body []byte) int64 {
	f.t.Helper()
	res, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: source, EventID: eventID, EventType: eventType, Body: body})
	if err != nil || !res.Inserted {
		f.t.Fatalf("insert %s: %+v %v", eventID, res, err)
	}
	return res.ID
}

// row reads the event back.
func (f *fixture) row(id int64) *inbox.Event {
	f.t.Helper()
	ev, err := f.store.EventGetByID(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

// ledger returns how many ledger rows exist and for how many events.
func (f *fixture) ledger() (rows, events int) {
	f.t.Helper()
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*), count(DISTINCT event_pk) FROM ledger`).Scan(&rows, &events); err != nil {
		f.t.Fatal(err)
	}
	return rows, events
}

func (f *fixture) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(f.ctx, sql, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// drain runs one Drain and fails the test on an error.
func (f *fixture) drain(p *processor.Processor) processor.Stats {
	f.t.Helper()
	st, err := p.Drain(f.ctx)
	if err != nil {
		f.t.Fatalf("drain: %v (stats %+v)", err, st)
	}
	return st
}

// writeLedger is the tests' handler: it applies an event by writing its
// ledger row in the processor's transaction.
func writeLedger(ctx context.Context, tx pgx.Tx, ev *processor.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO ledger (event_pk, attempt) VALUES ($1, $2)`, ev.ID, ev.Attempts)
	return err
}

// history returns the event's attempts.
func (f *fixture) history(id int64) []inbox.Attempt {
	f.t.Helper()
	h, err := f.store.AttemptListByEvent(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// noOpenClaims fails the test if a claim still holds events.
func (f *fixture) noOpenClaims() {
	f.t.Helper()
	if n := f.count(`SELECT count(*) FROM webhook_claims WHERE cardinality(event_ids) > 0`); n != 0 {
		f.t.Fatalf("%d claims still hold events", n)
	}
}

// tracedPool is newPool with every statement's text passed to seen.
func tracedPool(t testing.TB, url string, seen func(sql string)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range processor.SessionParams(processor.DefaultHandlerTimeout) {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.Tracer = sqlTracer(seen)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// countingPool is tracedPool counting the statements that match.
func countingPool(t testing.TB, url string, match func(sql string) bool) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	return tracedPool(t, url, func(sql string) {
		if match(sql) {
			n.Add(1)
		}
	}), &n
}

// sqlTracer is a pgx.QueryTracer passing each statement's text on.
type sqlTracer func(sql string)

func (s sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s(d.SQL)
	return ctx
}

func (sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// operator is who the tests' replays and requeues are recorded as.
var operator = inbox.Actor{Name: "ops@test", Reason: "a test"}

// presence is a want of check for a pointer field: set (not nil) or unset.
type presence bool

const (
	set   presence = true
	unset presence = false
)

func (p presence) String() string {
	if p {
		return "set"
	}
	return "unset"
}

// check compares the named fields of got (a struct, or a pointer to one,
// or a decoded log line) with want, reports each that differs by its
// name, both values shown, and then stops the test if any did. A want is
// the field's value (a pointer field is compared by what it points to;
// times with Equal; numbers and strings are converted to the field's
// type), or set or unset for a pointer's presence (a line's key's).
func check(t testing.TB, what string, got any, want map[string]any) {
	t.Helper()
	v := reflect.Indirect(reflect.ValueOf(got))
	failed := false
	for _, name := range slices.Sorted(maps.Keys(want)) {
		var f reflect.Value
		if v.Kind() == reflect.Map {
			f = v.MapIndex(reflect.ValueOf(name))
			if f.IsValid() && f.Kind() == reflect.Interface {
				f = f.Elem() // invalid for a JSON null
			}
			if p, ok := want[name].(presence); ok {
				if f.IsValid() != bool(p) {
					t.Errorf("%s[%q] = %v, want it %s", what, name, v.MapIndex(reflect.ValueOf(name)), p)
					failed = true
				}
				continue
			}
			if !f.IsValid() {
				t.Errorf("%s[%q] missing, want %v", what, name, want[name])
				failed = true
				continue
			}
		} else if f = v.FieldByName(name); !f.IsValid() {
			t.Fatalf("%s has no field %s", what, name)
		}
		if p, ok := want[name].(presence); ok {
			if f.IsNil() == bool(p) {
				t.Errorf("%s.%s = %v, want it %s", what, name, show(f), p)
				failed = true
			}
			continue
		}
		w := reflect.ValueOf(want[name])
		if f.Kind() == reflect.Pointer && w.Kind() != reflect.Pointer {
			if f.IsNil() {
				t.Errorf("%s.%s = nil, want %v", what, name, want[name])
				failed = true
				continue
			}
			f = f.Elem()
		}
		if w.Type() != f.Type() && w.Kind() != reflect.Struct && w.Type().ConvertibleTo(f.Type()) {
			w = w.Convert(f.Type())
		}
		if !same(f.Interface(), w.Interface()) {
			t.Errorf("%s.%s = %v, want %v", what, name, show(f), w)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

func same(a, b any) bool {
	if at, ok := a.(time.Time); ok {
		bt, ok := b.(time.Time)
		return ok && at.Equal(bt)
	}
	return reflect.DeepEqual(a, b)
}

// show is a field's value for a failure message: what a pointer points to.
func show(f reflect.Value) any {
	if f.Kind() == reflect.Pointer && !f.IsNil() {
		return f.Elem().Interface()
	}
	return f.Interface()
}

// attempts stops the test unless the history h has n attempts.
func attempts(t testing.TB, h []inbox.Attempt, n int) {
	t.Helper()
	if len(h) != n {
		t.Fatalf("%d attempts in the history, want %d: %+v", len(h), n, h)
	}
}
