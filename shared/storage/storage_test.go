package storage_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The receiver's queries must work in every query mode, since behind RDS
// Proxy or PgBouncer the functions run without prepared statements.
func TestReceiverQueriesInEveryQueryMode(t *testing.T) {
	t.Parallel()
	modes := make([]string, 0, len(storage.QueryModes))
	for m := range storage.QueryModes {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := storage.OpenPool(ctx, pgtest.URL(t), storage.PoolOptions{QueryMode: mode, RuntimeParams: map[string]string{"statement_timeout": "5s"}})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s := storage.New(pool)
			body := []byte(`{"id":"evt_1","n":"\u0000"}`) // raw-only fallback path too
			p := storage.EventInsertParams{Provider: "shop", EventID: "evt_1", EventType: "orders/create", Body: body,
				Metadata: map[string]string{"shopify_event_id": "98880550-7158-44d4-b7cd-2c97c8a091b5", "odd": "a\x00b"}}
			res, err := s.EventInsert(ctx, p)
			if err != nil || !res.Inserted || res.PayloadStored {
				t.Fatalf("insert: %+v %v", res, err)
			}
			p.Body = []byte(`{"id":"evt_1"}`)
			dup, err := s.EventInsert(ctx, p)
			if err != nil || dup.Inserted || !dup.Mismatch() || dup.ID != res.ID {
				t.Fatalf("duplicate: %+v %v", dup, err)
			}
			if err := s.PayloadMismatchInsert(ctx, "shop", "evt_1", dup.StoredSHA256, dup.BodySHA256, len(p.Body)); err != nil {
				t.Fatal(err)
			}
			ev, err := s.EventGetByKey(ctx, "shop", "evt_1")
			if err != nil || !bytes.Equal(ev.Body, body) || ev.Metadata["shopify_event_id"] == "" {
				t.Fatalf("get: %+v %v", ev, err)
			}
			if err := s.RejectionInsert(ctx, storage.Rejection{Provider: "shop", Cause: "signature_mismatch", Message: "m"}, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RejectionsList(ctx, time.Time{}, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RejectionsCountByCause(ctx, time.Time{}); err != nil {
				t.Fatal(err)
			}
			// Bodies that are not JSONB-able are stored raw-only, whether
			// they look like JSON (Postgres refuses them) or not.
			for i, b := range []string{`{"id":"x",`, `[1,2`, `payload=%7B%7D&x=1`, ``, `{"a":1}`} {
				r, err := s.EventInsert(ctx, storage.EventInsertParams{Provider: "raw", EventID: fmt.Sprint("e", i), Body: []byte(b)})
				if err != nil || !r.Inserted || r.PayloadStored != (b == `{"a":1}`) {
					t.Fatalf("body %q: %+v %v", b, r, err)
				}
				got, err := s.EventGetByKey(ctx, "raw", fmt.Sprint("e", i))
				if err != nil || string(got.Body) != b || (got.Payload == nil) == (b == `{"a":1}`) {
					t.Fatalf("body %q read back as %q, payload %q, %v", b, got.Body, got.Payload, err)
				}
			}
		})
	}
}

func TestPasswordHookIsCalledPerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	pool, err := storage.OpenPool(ctx, pgtest.URL(t), storage.PoolOptions{
		Password: func(_ context.Context, host string, port uint16, user string) (string, error) {
			calls++
			if host == "" || port == 0 || user == "" {
				t.Errorf("hook got %q %d %q", host, port, user)
			}
			return "token", nil // trust auth ignores it; IAM auth would check it
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("password hook calls = %d, want 1", calls)
	}
}
