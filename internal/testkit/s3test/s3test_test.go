package s3test_test

import (
	"context"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/s3test"
)

func TestStoreIsUsableAndIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, srvA := s3test.Store(t)
	b, srvB := s3test.Store(t)
	if srvA.Port() == srvB.Port() {
		t.Fatal("two tests share a server")
	}
	if _, err := a.Put(ctx, "k", []byte("v"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if objs, err := b.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("the other store sees %v, %v", objs, err)
	}
}
