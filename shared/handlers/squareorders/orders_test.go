package squareorders_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/testclock"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers/squareorders"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
	"github.com/webhook-inbox/webhook-inbox/shared/storage/migrate"
)

// TestMain gives the tests databases with the package's tables, whether or
// not shared/handlers registers it.
func TestMain(m *testing.M) { pgtest.Main(m, squareorders.Schema) }

const orderID = "eA3vssLHKJrv9H0IdJCM3gNqfdcZY"

type fixture struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *storage.Store
	reg   *processor.Registry
	now   time.Time
}

// setup takes a fresh database (pgtest applies the deployed schema, this
// package's table included) and registers the order handlers for
// square-kind sources, as functions/processor does. The processor connects
// as its own role (a statement its grants do not allow fails here); the
// test seeds and reads as the owner.
func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	reg := processor.NewRegistry()
	squareorders.Register(reg, processor.Kind("square"))
	return &fixture{t: t, ctx: ctx, pool: pool, store: storage.New(pool), reg: reg, now: time.Now().Add(time.Minute)}
}

func (f *fixture) processor() *processor.Processor {
	f.t.Helper()
	p, err := processor.New(processor.Config{SourceKinds: map[string]string{"square": "square"}},
		processor.Deps{Pool: pgtest.As(f.t, f.pool, migrate.RoleProcessor), Registry: f.reg, Clock: testclock.At(f.now)})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// event returns the testdata event of this type for version v of the
// order, in state, with its own event id.
func event(t *testing.T, typ string, v int, state string) []byte {
	t.Helper()
	file, key := "testdata/order_created.json", "order_created"
	if typ == squareorders.TypeOrderUpdated {
		file, key = "testdata/order_updated.json", "order_updated"
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev["event_id"] = fmt.Sprintf("evt-%s-v%d", key, v)
	o := ev["data"].(map[string]any)["object"].(map[string]any)[key].(map[string]any)
	o["version"], o["state"] = v, state
	if key == "order_updated" {
		o["updated_at"] = time.Date(2024, 6, 3, 16, 14, v, 0, time.UTC).Format(time.RFC3339Nano)
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// store keeps bodies as the receiver would (Square's id is event_id).
func (f *fixture) storeEvents(bodies ...[]byte) {
	f.t.Helper()
	for _, b := range bodies {
		var id struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		if err := json.Unmarshal(b, &id); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.store.EventInsert(f.ctx, storage.EventInsertParams{Source: "square", EventID: id.EventID, EventType: id.Type, Body: b}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) deliver(bodies ...[]byte) processor.Stats {
	f.t.Helper()
	f.storeEvents(bodies...)
	st, err := f.processor().Drain(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) get() squareorders.Order {
	f.t.Helper()
	o, err := squareorders.Get(f.ctx, f.pool, "square", orderID)
	if err != nil {
		f.t.Fatal(err)
	}
	return o
}

func TestOrderCreatedThenUpdated(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw, _ := os.ReadFile("testdata/order_created.json")
	if st := f.deliver(raw); st.Handled != 1 {
		t.Fatalf("stats = %+v", st)
	}
	o := f.get()
	createdAt := time.Date(2024, 6, 3, 16, 14, 26, 129e6, time.UTC)
	if !field.Check(t, "created",
		field.Eq("Version", o.Version, 1),
		field.Eq("State", o.State, "OPEN"),
		field.Eq("LocationID", o.LocationID, "FPYCBCHYMXFK1"),
		field.Eq("MerchantID", *o.MerchantID, "5S9MXCS9Y99KK"),
		field.Is("OrderCreatedAt", o.OrderCreatedAt, o.OrderCreatedAt.Equal(createdAt), createdAt.String()),
		field.Eq("OrderUpdatedAt", o.OrderUpdatedAt, nil),
		field.Eq("LastEventID", o.LastEventID, "116038d3-2948-439f-8679-fc86dbf80f69"),
	) {
		t.FailNow()
	}
	raw, _ = os.ReadFile("testdata/order_updated.json")
	f.deliver(raw)
	if o := f.get(); o.Version != 2 || o.OrderUpdatedAt == nil || o.LastEventID != "4b8e5c91-9f17-4cf1-900a-4a0629f81add" {
		t.Fatalf("updated: %+v", o)
	}
}

// TestOlderVersionNeverOverwritesNewer: deliveries in the wrong order end
// with the newest version.
func TestOlderVersionNeverOverwritesNewer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.deliver(event(t, squareorders.TypeOrderUpdated, 3, "COMPLETED"))
	f.deliver(event(t, squareorders.TypeOrderUpdated, 2, "OPEN"))
	f.deliver(event(t, squareorders.TypeOrderCreated, 1, "OPEN"))
	o := f.get()
	updatedAt := time.Date(2024, 6, 3, 16, 14, 3, 0, time.UTC)
	if !field.Check(t, "order",
		field.Eq("Version", o.Version, 3),
		field.Eq("State", o.State, "COMPLETED"),
		field.Eq("LastEventID", o.LastEventID, "evt-order_updated-v3"),
		field.Is("OrderUpdatedAt", o.OrderUpdatedAt, o.OrderUpdatedAt.Equal(updatedAt), updatedAt.String()),
		field.Is("OrderCreatedAt", o.OrderCreatedAt, o.OrderCreatedAt != nil, "set"),
	) {
		t.FailNow()
	}
	// The same version again, under another event id, changes nothing.
	again := event(t, squareorders.TypeOrderUpdated, 3, "CANCELED")
	again = bytes.Replace(again, []byte("evt-order_updated-v3"), []byte("evt-redelivered-v3"), 1)
	f.deliver(again)
	if o := f.get(); o.State != "COMPLETED" || o.LastEventID != "evt-order_updated-v3" {
		t.Fatalf("same version overwrote: %+v", o)
	}
}

// TestConcurrentShuffledVersions: 40 versions of one order, delivered in a
// random order and applied by 3 processors at once, end with version 40.
func TestConcurrentShuffledVersions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const versions = 40
	bodies := make([][]byte, 0, versions)
	for v := 1; v <= versions; v++ {
		typ := squareorders.TypeOrderUpdated
		if v == 1 {
			typ = squareorders.TypeOrderCreated
		}
		bodies = append(bodies, event(t, typ, v, fmt.Sprint("STATE_", v)))
	}
	rand.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	f.storeEvents(bodies...)
	var wg sync.WaitGroup
	for range 3 {
		p := f.processor()
		wg.Go(func() {
			if _, err := p.Drain(f.ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if o := f.get(); o.Version != versions || o.State != fmt.Sprint("STATE_", versions) {
		t.Fatalf("order = %+v", o)
	}
	var unprocessed int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_events WHERE processed_at IS NULL`).Scan(&unprocessed); err != nil || unprocessed != 0 {
		t.Fatalf("unprocessed = %d, %v", unprocessed, err)
	}
}

func TestMalformedOrderIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	created := event(t, squareorders.TypeOrderCreated, 1, "OPEN")
	// An order.updated that carries order_created: no summary to read.
	wrongKey := []byte(`{"merchant_id":"M","type":"order.updated","event_id":"evt-wrong","data":{"type":"order","id":"o","object":{"order_created":{"order_id":"o","location_id":"L","state":"OPEN","version":1}}}}`)
	noVersion := []byte(`{"merchant_id":"M","type":"order.created","event_id":"evt-nov","data":{"type":"order","id":"o","object":{"order_created":{"order_id":"o","location_id":"L","state":"OPEN"}}}}`)
	st := f.deliver(created, wrongKey, noVersion)
	if st.Handled != 1 || st.DeadLettered != 2 || st.Retried != 0 {
		t.Fatalf("stats = %+v", st)
	}
}
