package storage_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// An event's row holds its processing state, and its body and payload out
// of line (00014): the processor's update, which writes a whole new
// version of the row, then copies pointers, not bodies. Every later
// variable-width column must be kept in the row (STORAGE MAIN), or the
// 128-byte toast target would push it out of line too.
func TestStorageLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.Pool(t)
	store := storage.New(pool)

	var opts []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'webhook_events'::regclass`).Scan(&opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(opts, ","), "toast_tuple_target=128") {
		t.Errorf("webhook_events options %v, want toast_tuple_target=128", opts)
	}
	rows, err := pool.Query(ctx, `SELECT attname::text, attstorage::text FROM pg_attribute
		WHERE attrelid = 'webhook_events'::regclass AND attnum > 0 AND NOT attisdropped AND attlen = -1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			t.Fatal(err)
		}
		want := "m"
		if name == "body" || name == "payload" {
			want = "x"
		}
		if kind != want {
			t.Errorf("webhook_events.%s has storage %q, want %q: a new variable-width column needs ALTER COLUMN ... SET STORAGE MAIN (see migration 00014)",
				name, kind, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// 300 events of a 1 KiB JSON body (stored twice: body and payload),
	// received then processed; random, so that it does not compress.
	const n = 300
	random := make([]byte, 496)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	body := []byte(`{"type":"invoice.paid","data":"` + hex.EncodeToString(random) + `"}`)
	factory.Events(ctx, t, store, n, &factory.EventOpts{Body: body})
	heap, toast := eventSizes(ctx, t, store)
	t.Logf("received: heap %d B, toast %d B", heap, toast)
	if perRow := heap / n; perRow > 600 {
		t.Errorf("received: %d bytes of heap per event of a %d-byte body, want at most 600 (bodies out of line)", perRow, len(body))
	}
	if toast < 2*n*int64(len(body))/4 {
		t.Errorf("received: a toast table of %d bytes for %d bodies and payloads of %d bytes", toast, n, len(body))
	}
	factory.ProcessDue(ctx, t, store, time.Now())
	heap2, toast2 := eventSizes(ctx, t, store)
	if perRow := (heap2 - heap) / n; perRow > 600 {
		t.Errorf("processed: the heap grew by %d bytes per event, want at most 600 (a new row version copies pointers)", perRow)
	}
	if toast2 != toast {
		t.Errorf("processed: the toast table went from %d to %d bytes; an update must not write the bodies again", toast, toast2)
	}
}

// eventSizes returns the sizes of webhook_events' heap and of its toast
// storage, as webhookctl stats reports them.
func eventSizes(ctx context.Context, t *testing.T, store *storage.Store) (heap, toast int64) {
	t.Helper()
	sizes, err := store.PGTableSizes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sizes {
		if s.Name == "webhook_events" {
			return s.Table, s.TOAST
		}
	}
	t.Fatalf("no size for webhook_events in %+v", sizes)
	return 0, 0
}
