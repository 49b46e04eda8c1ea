package storage_test

import (
	"context"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPasswordHookIsCalledPerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	pool, err := storage.PoolConfig{URL: pgtest.URL(t),
		Password: func(_ context.Context, host string, port uint16, user string) (string, error) {
			calls++
			if host == "" || port == 0 || user == "" {
				t.Errorf("hook got %q %d %q", host, port, user)
			}
			return "token", nil // trust auth ignores it; IAM auth would check it
		},
	}.Open(ctx)
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
