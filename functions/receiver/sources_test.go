package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// TestRotatedSourcesSecretIsPickedUp: the Lambda reads its sources from
// their secret at init, through the real SDK; once the secret is rotated
// in Secrets Manager, the third delivery signed with the new secret (a
// burst of signature mismatches) makes the same container read it again,
// and is stored, without waiting for the interval or a new container.
func TestRotatedSourcesSecretIsPickedUp(t *testing.T) {
	t.Parallel()
	sm := secretstest.Shared(t)
	arn := sm.Create(t, "sources", sources)
	env := map[string]string{"DATABASE_URL": pgtest.URL(t), "WEBHOOK_SOURCES_SECRET_ARN": arn, "AWS_REGION": secretstest.Region, "LOG_LEVEL": "error"}
	h, shutdown, err := setup(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	template, old := stripeTemplate(t)
	if a, err := deliver(t.Context(), h, template, old, "evt_before_rotation"); err != nil || a.status != "accepted" {
		t.Fatalf("before the rotation: %+v %v", a, err)
	}

	const rotated = `{"sources":{"stripe":{"kind":"stripe","secrets":["whsec_lambda_rotated_0123456789"]}}}`
	sm.Put(t, arn, rotated)
	set, err := source.Parse([]byte(rotated))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup("stripe")
	for i := range 3 {
		a, err := deliver(t.Context(), h, template, src, fmt.Sprintf("evt_rotated_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{true: 200, false: 401}[i == 2]
		if a.code != want {
			t.Fatalf("delivery %d signed with the rotated secret: %+v, want %d", i+1, a, want)
		}
	}
	if n := sm.Fetches(arn); n != 2 {
		t.Errorf("the secret was read %d times, want 2 (at init, and once after the burst)", n)
	}
	if a, err := deliver(t.Context(), h, template, old, "evt_old_secret"); err != nil || a.code != 401 {
		t.Fatalf("the secret rotated away: %+v %v, want 401", a, err)
	}
}
