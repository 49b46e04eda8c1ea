package source

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Signatures made by the senders' own libraries (test-only dependencies)
// verify here, and ours verify there: our signing code is not the only
// judge of our verifying code.

func TestStripeGoInterop(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"pay":{"kind":"stripe","secrets":["whsec_new_3f9a","whsec_old_77c1"]}}}`, "pay")
	body := fixture(t, "stripe_invoice_paid.json")

	// stripe-go signs, we verify (with either secret: rotation).
	for _, secret := range []string{"whsec_new_3f9a", "whsec_old_77c1"} {
		p := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now})
		if _, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {p.Header}}, body, now); err != nil {
			t.Fatalf("stripe-go's signature with %s does not verify: %v", secret, err)
		}
		// The same header after the tolerance, or before it, is refused.
		for _, at := range []time.Time{now.Add(301 * time.Second), now.Add(-301 * time.Second)} {
			_, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {p.Header}}, body, at)
			wantCause(t, err, inbox.CauseTimestampOutOfTolerance)
		}
		_, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {p.Header}}, append([]byte(" "), body...), now)
		wantCause(t, err, inbox.CauseSignatureMismatch)
	}

	// During a secret roll Stripe sends one v1 per active secret.
	a := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_unknown", Timestamp: now})
	b := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_old_77c1", Timestamp: now})
	rolled := fmt.Sprintf("%s,v1=%x", a.Header, b.Signature)
	if _, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {rolled}}, body, now); err != nil {
		t.Fatalf("two v1 entries, one for a configured secret: %v", err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, rolled, "whsec_old_77c1"); err != nil {
		t.Fatalf("stripe-go disagrees on the rolled header: %v", err)
	}

	// We sign, stripe-go verifies; and it refuses what we refuse.
	h, err := src.Sign(body, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, h.Get("Stripe-Signature"), "whsec_new_3f9a"); err != nil {
		t.Fatalf("stripe-go refuses our signature: %v", err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, h.Get("Stripe-Signature"), "whsec_old_77c1"); err == nil {
		t.Fatal("stripe-go accepts our signature under another secret")
	}
	if err := webhook.ValidatePayloadIgnoringTolerance([]byte(strings.Replace(string(body), "in_", "xx_", 1)), h.Get("Stripe-Signature"), "whsec_new_3f9a"); err == nil {
		t.Fatal("stripe-go accepts a tampered body")
	}
}

func TestStandardWebhooksLibraryInterop(t *testing.T) {
	t.Parallel()
	const newKey, oldKey = "whsec_bmV3LXNlY3JldC1rZXktMTIzNDU2", "whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2"
	src := lookup(t, `{"sources":{"std":{"kind":"standard","secrets":["`+newKey+`","`+oldKey+`"]}}}`, "std")
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1","note":"<b>é</b>"}}`)

	// The library signs (with either secret), we verify, under both the
	// webhook-* and the svix-* header names.
	for _, secret := range []string{newKey, oldKey} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_lib_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{"Webhook", "Svix"} {
			h := headers(prefix+"-Id", "msg_lib_1", prefix+"-Timestamp", fmt.Sprint(now.Unix()), prefix+"-Signature", sig)
			id, err := src.Verifier.Verify(h, body, now)
			if err != nil || id.EventID != "msg_lib_1" || id.EventType != "invoice.paid" {
				t.Fatalf("%s headers, library signature: %+v, %v", prefix, id, err)
			}
		}
		stale, _ := wh.Sign("msg_lib_1", now.Add(-10*time.Minute), body)
		_, err = src.Verifier.Verify(headers("Webhook-Id", "msg_lib_1", "Webhook-Timestamp", fmt.Sprint(now.Add(-10*time.Minute).Unix()), "Webhook-Signature", stale), body, now)
		wantCause(t, err, inbox.CauseTimestampOutOfTolerance)
	}

	// We sign, the library verifies; it refuses a tampered body too.
	h, err := src.Sign(body, "msg_ours_1", now)
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := standardwebhooks.NewWebhook(newKey)
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		t.Fatalf("the standard-webhooks library refuses our signature: %v", err)
	}
	if err := wh.VerifyIgnoringTimestamp(append(body, ' '), h); err == nil {
		t.Fatal("the library accepts a tampered body")
	}
	other, _ := standardwebhooks.NewWebhook(oldKey)
	if err := other.VerifyIgnoringTimestamp(body, h); err == nil {
		t.Fatal("the library accepts our signature under another secret")
	}
}
