package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// stripeHeader signs like Stripe does, independently of the code under test.
func stripeHeader(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.%s", ts, body)
	return fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
}

func TestStripeVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"pay":{"kind":"stripe","secrets":["whsec_new_0123456789abcdefghij","whsec_old_0123456789abcdefghij"]}}}`)
	src, _ := set.Lookup("pay")
	body := `{"id":"evt_1","type":"invoice.paid","data":{}}`
	ts := now.Unix()
	good := stripeHeader("whsec_new_0123456789abcdefghij", ts, body)
	old := stripeHeader("whsec_old_0123456789abcdefghij", ts, body)
	v1 := func(h string) string { _, s, _ := strings.Cut(h, "v1="); return s }

	tests := []struct {
		name   string
		header []string // Stripe-Signature values; nil = absent
		body   string
		want   inbox.Cause
		wantID string
	}{
		{"valid", []string{good}, body, "", "evt_1"},
		{"rotated: signed with the old secret", []string{old}, body, "", "evt_1"},
		{"several v1 entries, one good", []string{fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, strings.Repeat("ab", 32), v1(good))}, body, "", "evt_1"},
		{"v0 and garbled v1 beside a good one", []string{fmt.Sprintf("t=%d,v0=zz,v1=nothex,v1=%s", ts, v1(good))}, body, "", "evt_1"},
		{"tampered body", []string{good}, strings.Replace(body, "evt_1", "evt_2", 1), inbox.CauseSignatureMismatch, ""},
		{"wrong secret", []string{stripeHeader("whsec_other", ts, body)}, body, inbox.CauseSignatureMismatch, ""},
		{"stale timestamp", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts-301, body)}, body, inbox.CauseTimestampOutOfTolerance, ""},
		{"future timestamp", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts+301, body)}, body, inbox.CauseTimestampOutOfTolerance, ""},
		{"edge of tolerance", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts-300, body)}, body, "", "evt_1"},
		{"missing header", nil, body, inbox.CauseSignatureMissing, ""},
		{"empty header", []string{""}, body, inbox.CauseSignatureMissing, ""},
		{"garbled header", []string{"garbage"}, body, inbox.CauseSignatureMalformed, ""},
		{"no timestamp", []string{"v1=" + v1(good)}, body, inbox.CauseSignatureMalformed, ""},
		{"no v1", []string{fmt.Sprintf("t=%d", ts)}, body, inbox.CauseSignatureMalformed, ""},
		{"timestamp not a number", []string{"t=abc,v1=" + v1(good)}, body, inbox.CauseSignatureMalformed, ""},
		{"duplicated header", []string{good, stripeHeader("whsec_new_0123456789abcdefghij", ts+1, body)}, body, inbox.CauseSignatureMalformed, ""},
		{"signed empty body", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts, "")}, "", inbox.CauseUnparsableBody, ""},
		{"signed non-JSON body", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts, "id=evt_1")}, "id=evt_1", inbox.CauseUnparsableBody, ""},
		{"signed JSON array", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts, "[1]")}, "[1]", inbox.CauseUnparsableBody, ""},
		{"signed body without id", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts, `{"type":"x"}`)}, `{"type":"x"}`, inbox.CauseMissingEventID, ""},
		{"numeric id", []string{stripeHeader("whsec_new_0123456789abcdefghij", ts, `{"id":12}`)}, `{"id":12}`, inbox.CauseUnparsableBody, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for _, v := range tt.header {
				h.Add("Stripe-Signature", v)
			}
			id, err := src.Verifier.Verify(h, []byte(tt.body), now)
			wantCause(t, err, tt.want)
			if tt.wantID != "" && id.EventID != tt.wantID {
				t.Fatalf("event id = %q, want %q", id.EventID, tt.wantID)
			}
		})
	}
}

// Signatures made by the senders' own libraries (test-only dependencies)
// verify here, and ours verify there: our signing code is not the only
// judge of our verifying code.
func TestStripeGoInterop(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"pay":{"kind":"stripe","secrets":["whsec_new_3f9a_0123456789abcde","whsec_old_77c1_0123456789abcde"]}}}`, "pay")
	body := fixture(t, "stripe_invoice_paid.json")

	// stripe-go signs, we verify (with either secret: rotation).
	for _, secret := range []string{"whsec_new_3f9a_0123456789abcde", "whsec_old_77c1_0123456789abcde"} {
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
	b := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_old_77c1_0123456789abcde", Timestamp: now})
	rolled := fmt.Sprintf("%s,v1=%x", a.Header, b.Signature)
	if _, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {rolled}}, body, now); err != nil {
		t.Fatalf("two v1 entries, one for a configured secret: %v", err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, rolled, "whsec_old_77c1_0123456789abcde"); err != nil {
		t.Fatalf("stripe-go disagrees on the rolled header: %v", err)
	}

	// We sign, stripe-go verifies; and it refuses what we refuse.
	h, err := src.Sign(body, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, h.Get("Stripe-Signature"), "whsec_new_3f9a_0123456789abcde"); err != nil {
		t.Fatalf("stripe-go refuses our signature: %v", err)
	}
	if err := webhook.ValidatePayloadIgnoringTolerance(body, h.Get("Stripe-Signature"), "whsec_old_77c1_0123456789abcde"); err == nil {
		t.Fatal("stripe-go accepts our signature under another secret")
	}
	if err := webhook.ValidatePayloadIgnoringTolerance([]byte(strings.Replace(string(body), "in_", "xx_", 1)), h.Get("Stripe-Signature"), "whsec_new_3f9a_0123456789abcde"); err == nil {
		t.Fatal("stripe-go accepts a tampered body")
	}
}

func FuzzStripeVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"s":{"kind":"stripe","secrets":["whsec_fuzz_new_0123456789abcde","whsec_fuzz_old_0123456789abcde"]}}}`, "s")
	body := `{"id":"evt_1","type":"invoice.paid"}`
	f.Add([]byte(body), stripeHeader("whsec_fuzz_old_0123456789abcde", now.Unix(), body), int64(0), uint(0))
	f.Add([]byte(body), "t=1700000000,v1=zz,v0=00", int64(301), uint(3))
	f.Add([]byte(`{"id":12}`), "t=,v1=", int64(-301), uint(1))
	f.Add([]byte(""), "t=1,t=2", int64(0), uint(0))
	f.Fuzz(func(t *testing.T, body []byte, header string, skew int64, flip uint) {
		id, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {header}}, body, now)
		checkOutcome(t, "arbitrary header", id, err)
		fuzzRoundTrip(t, src, body, "", "", flip, skew, DefaultTolerance)
	})
}
