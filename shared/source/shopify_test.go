package source

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// shopifyOpenSSLSig is the fixture's signature computed by OpenSSL, an
// independent implementation (Shopify publishes no fixed test vector):
// openssl dgst -sha256 -hmac shopify-test-secret -binary
// testdata/shopify_orders_create.json | base64
const shopifyOpenSSLSig = "O/nLAnezWz86Ik+7hHTglm5iWUtb9eZq3EU3aYk6jiE="

func shopifyHeaders(sig string) http.Header {
	return headers(
		"X-Shopify-Hmac-Sha256", sig,
		"X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"X-Shopify-Topic", "orders/create",
		"X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5",
		"X-Shopify-Shop-Domain", "shop.myshopify.com",
		"X-Shopify-API-Version", "2025-07",
		"X-Shopify-Triggered-At", "2023-03-29T18:00:27.877041743Z",
	)
}

func TestShopifyVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{
	 "shop":{"kind":"shopify","secrets":["shopify-new-secret","shopify-test-secret"]},
	 "oldonly":{"kind":"shopify","secrets":["shopify-test-secret"]},
	 "other":{"kind":"shopify","secrets":["other-secret_012"]}}}`)
	src, _ := set.Lookup("shop")
	body := fixture(t, "shopify_orders_create.json")
	signWith := func(name string, b []byte) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.SignEvent(b, "98880550-7158-44d4-b7cd-2c97c8a091b5", "orders/create", now)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	with := func(edit func(http.Header)) http.Header { h := shopifyHeaders(shopifyOpenSSLSig); edit(h); return h }
	const hdr = "X-Shopify-Hmac-Sha256"
	// A JSON round trip changes the bytes (escapes, number precision):
	// the signature is over what was sent, never over a re-serialisation.
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	reserialised, _ := json.Marshal(v)

	tests := []struct {
		name string
		h    http.Header
		body []byte
		want inbox.Cause
		meta bool
	}{
		{"valid (OpenSSL, old secret)", shopifyHeaders(shopifyOpenSSLSig), body, "", true},
		{"valid (signed by us, new secret)", signWith("shop", body), body, "", false},
		{"rotated: old secret only", signWith("oldonly", body), body, "", false},
		{"tampered body", shopifyHeaders(shopifyOpenSSLSig), bytes.Replace(body, []byte("403.00"), []byte("1.00"), 1), inbox.CauseSignatureMismatch, false},
		{"re-serialised body", shopifyHeaders(shopifyOpenSSLSig), reserialised, inbox.CauseSignatureMismatch, false},
		{"wrong secret", signWith("other", body), body, inbox.CauseSignatureMismatch, false},
		{"missing signature", with(func(h http.Header) { h.Del(hdr) }), body, inbox.CauseSignatureMissing, false},
		{"duplicated signature", with(func(h http.Header) { h.Add(hdr, shopifyOpenSSLSig) }), body, inbox.CauseSignatureMalformed, false},
		{"garbled signature", with(func(h http.Header) { h.Set(hdr, "%%%") }), body, inbox.CauseSignatureMalformed, false},
		{"sha256= prefix is not Shopify's", with(func(h http.Header) { h.Set(hdr, "sha256="+shopifyOpenSSLSig) }), body, inbox.CauseSignatureMalformed, false},
		{"no webhook id: the event id is enough", with(func(h http.Header) { h.Del("X-Shopify-Webhook-Id") }), body, "", false},
		{"missing event id and webhook id", with(func(h http.Header) { h.Del("X-Shopify-Webhook-Id"); h.Del("X-Shopify-Event-Id") }), body, inbox.CauseMissingEventID, false},
		{"duplicated event id", with(func(h http.Header) { h.Add("X-Shopify-Event-Id", "x") }), body, inbox.CauseMissingEventID, false},
		{"event id too long", with(func(h http.Header) { h.Set("X-Shopify-Event-Id", strings.Repeat("9", 300)) }), body, inbox.CauseMissingEventID, false},
		{"no event id: duplicated webhook id", with(func(h http.Header) { h.Del("X-Shopify-Event-Id"); h.Add("X-Shopify-Webhook-Id", "x") }), body, inbox.CauseMissingEventID, false},
		{"no event id: webhook id too long", with(func(h http.Header) {
			h.Del("X-Shopify-Event-Id")
			h.Set("X-Shopify-Webhook-Id", strings.Repeat("9", 300))
		}), body, inbox.CauseMissingEventID, false},
		{"duplicated topic", with(func(h http.Header) { h.Add("X-Shopify-Topic", "orders/paid") }), body, inbox.CauseInvalidEventType, false},
		{"signed non-JSON body is fine (id and type are headers)", signWith("shop", []byte("not json")), []byte("not json"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h, tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want != "" {
				return
			}
			// The event id, which Shopify's guide names as the key of
			// duplicates, not the webhook id of this delivery.
			if id.EventID != "98880550-7158-44d4-b7cd-2c97c8a091b5" || id.EventType != "orders/create" {
				t.Fatalf("identity = %+v", id)
			}
			if tt.meta {
				want := map[string]string{
					"shopify_event_id":     "98880550-7158-44d4-b7cd-2c97c8a091b5",
					"shopify_webhook_id":   "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
					"shopify_shop_domain":  "shop.myshopify.com",
					"shopify_api_version":  "2025-07",
					"shopify_triggered_at": "2023-03-29T18:00:27.877041743Z",
				}
				for k, v := range want {
					if id.Metadata[k] != v {
						t.Fatalf("metadata = %v, want %v", id.Metadata, want)
					}
				}
			}
		})
	}
}

// Without X-Shopify-Event-Id the webhook id is the event id, as before;
// one event delivered to two subscriptions (two webhook ids, one event id)
// is one event.
func TestShopifyEventIDFallsBackToWebhookID(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"shop":{"kind":"shopify","secrets":["shopify-test-secret"]}}}`, "shop")
	body := fixture(t, "shopify_orders_create.json")
	h := shopifyHeaders(shopifyOpenSSLSig)
	h.Del("X-Shopify-Event-Id")
	id, err := src.Verifier.Verify(h, body, now)
	if err != nil || id.EventID != "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043" || id.Metadata["shopify_webhook_id"] != id.EventID {
		t.Fatalf("without an event id: %+v, %v; want the webhook id", id, err)
	}
	first, second := shopifyHeaders(shopifyOpenSSLSig), shopifyHeaders(shopifyOpenSSLSig)
	second.Set("X-Shopify-Webhook-Id", "0d5f6a1e-0000-4000-8000-00000000beef") // another subscription
	a, errA := src.Verifier.Verify(first, body, now)
	b, errB := src.Verifier.Verify(second, body, now)
	if errA != nil || errB != nil {
		t.Fatalf("two subscriptions: %v, %v", errA, errB)
	}
	if !field.Check(t, "two subscriptions, want one event id, two webhook ids",
		field.Eq("second EventID", b.EventID, a.EventID),
		field.Is(`second Metadata["shopify_webhook_id"]`, b.Metadata["shopify_webhook_id"],
			a.Metadata["shopify_webhook_id"] != b.Metadata["shopify_webhook_id"], "not the first's"),
	) {
		t.FailNow()
	}
	if !src.GuardBody {
		t.Fatal("a shopify source must guard bodies: Shopify signs no header")
	}
}

// Metadata is informational: a value that could not be stored is left out,
// never a reason to refuse an authentic event.
func TestShopifyMetadataIsBestEffort(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"shop":{"kind":"shopify","secrets":["shopify-test-secret"]}}}`, "shop")
	body := fixture(t, "shopify_orders_create.json")
	h := shopifyHeaders(shopifyOpenSSLSig)
	h.Add("X-Shopify-Api-Version", "2025-10")                // repeated: ambiguous
	h.Set("X-Shopify-Shop-Domain", "shop\x00.myshopify.com") // NUL: JSONB cannot hold it
	h.Set("X-Shopify-Webhook-Id", strings.Repeat("v", 300))  // too long
	h.Del("X-Shopify-Triggered-At")
	id, err := src.Verifier.Verify(h, body, now)
	if err != nil {
		t.Fatal(err)
	}
	// The event id is the one value left: it is the event's id too.
	if want := map[string]string{"shopify_event_id": id.EventID}; !maps.Equal(id.Metadata, want) {
		t.Fatalf("metadata = %v, want %v", id.Metadata, want)
	}
}

func FuzzShopifyVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"s":{"kind":"shopify","secrets":["shopify-test-secret","shopify-old_0123"]}}}`, "s")
	f.Add([]byte(`{"id":820982911946154508}`), shopifyOpenSSLSig, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", uint(0))
	f.Add([]byte(``), "", "", "", uint(0))
	f.Add([]byte(`x`), "AAAA, BBBB", " id ", "\xff", uint(7))
	f.Fuzz(func(t *testing.T, body []byte, sig, webhookID, topic string, flip uint) {
		h := http.Header{"X-Shopify-Hmac-Sha256": {sig}, "X-Shopify-Webhook-Id": {webhookID}, "X-Shopify-Topic": {topic}, "X-Shopify-Event-Id": {topic}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		fuzzRoundTrip(t, src, body, webhookID, topic, flip, 0, 0)
	})
}
