package source

import (
	"strings"
	"testing"
)

// Weak configuration stops the receiver at start-up: secrets shorter than
// the kind's minimum and tolerances above an hour. The error names the
// source and the field, never the secret.
func TestWeakConfigurationRefused(t *testing.T) {
	t.Parallel()
	const hmacRest = `,"signature_header":"X-Sig","event_id":{"json":"id"}`
	tests := []struct {
		name, source, secret, field string
	}{
		{"stripe secret too short", `"kind":"stripe","secrets":["whsec_abcdefghijklmnopqrstuvw"]`, "whsec_abcdefghijklmnopqrstuvw", "secrets"},
		{"stripe secret without whsec_", `"kind":"stripe","secrets":["abcdefghijklmnopqrstuvwxyz0123456789"]`, "abcdefghijklmnopqrstuvwxyz0123456789", "secrets"},
		{"stripe one-byte secret", `"kind":"stripe","secrets":["whsec_abcdefghijklmnopqrstuvwxyz","x"]`, `"x"`, "secrets"},
		// 23 bytes decoded: one short of the Standard Webhooks minimum.
		{"standard key too short", `"kind":"standard","secrets":["whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnc="]`, "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnc", "secrets"},
		{"github secret too short", `"kind":"github","secrets":["fifteen-bytes!!"]`, "fifteen-bytes!!", "secrets"},
		{"github one-byte secret", `"kind":"github","secrets":["s"]`, `"s"`, "secrets"},
		{"square key too short", `"kind":"square","secrets":["short-sq-key"],"notification_url":"https://example.com/w"`, "short-sq-key", "secrets"},
		{"shopify secret too short", `"kind":"shopify","secrets":["shpss_abc"]`, "shpss_abc", "secrets"},
		{"hmac key too short", `"kind":"hmac","secrets":["k"]` + hmacRest, `"k"`, "secrets"},
		{"hmac base64 key too short (decoded)", `"kind":"hmac","secrets":["base64:YWJjZGVmZ2hpamtsbW5v"]` + hmacRest, "YWJjZGVmZ2hpamtsbW5v", "secrets"},
		{"stripe tolerance above an hour", `"kind":"stripe","secrets":["whsec_abcdefghijklmnopqrstuvwxyz"],"tolerance_seconds":3601`, "whsec_abcdefghijklmnopqrstuvwxyz", "tolerance_seconds"},
		{"standard tolerance of a day", `"kind":"standard","secrets":["whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo="],"tolerance_seconds":86400`, "YWJjZGVm", "tolerance_seconds"},
		{"hmac tolerance above an hour", `"kind":"hmac","secrets":["sixteen-bytes!!!"],"signature_header":"X-Sig","timestamp_header":"X-Ts",
		  "signed_content":"{timestamp}.{body}","tolerance_seconds":7200,"event_id":{"json":"id"}`, "sixteen-bytes!!!", "tolerance_seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`{"sources":{"weak-one":{` + tt.source + `}}}`))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, `source "weak-one"`) || !strings.Contains(msg, `field "`+tt.field+`"`) {
				t.Fatalf("error %q does not name the source and field %q", msg, tt.field)
			}
			if strings.Contains(msg, tt.secret) {
				t.Fatalf("error %q contains the secret", msg)
			}
		})
	}
}

// The minimums are below what each sender issues: secrets of the real
// formats, and the limits themselves, are accepted.
func TestRealSecretFormatsAccepted(t *testing.T) {
	t.Parallel()
	mustParse(t, `{"sources":{
	 "stripe-dashboard":{"kind":"stripe","secrets":["whsec_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"],"tolerance_seconds":3600},
	 "stripe-cli":{"kind":"stripe","secrets":["whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]},
	 "stripe-minimum":{"kind":"stripe","secrets":["whsec_abcdefghijklmnopqrstuvwx"]},
	 "svix":{"kind":"standard","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]},
	 "github":{"kind":"github","secrets":["sixteen-bytes!!!"]},
	 "square":{"kind":"square","secrets":["Ibxx_5AKakO-3qeNVR61Dw"],"notification_url":"https://example.com/w"},
	 "shopify-app":{"kind":"shopify","secrets":["shpss_0123456789abcdef0123456789abcdef"]},
	 "shopify-admin":{"kind":"shopify","secrets":["0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]},
	 "hmac":{"kind":"hmac","secrets":["base64:YWJjZGVmZ2hpamtsbW5vcHE="],"signature_header":"X-Sig","event_id":{"json":"id"}}}}`)
}

// An hmac event id from a header the signature does not cover is refused
// unless the source opts in; the opt-in is a start-up warning, and makes
// the receiver guard the source's bodies.
func TestHMACUnsignedEventIDHeader(t *testing.T) {
	t.Parallel()
	const base = `"kind":"hmac","secrets":["sixteen-bytes!!!"],"signature_header":"X-Sig"`
	_, err := Parse([]byte(`{"sources":{"acme":{` + base + `,"event_id":{"header":"X-Event-Id"}}}}`))
	if err == nil || !strings.Contains(err.Error(), `source "acme": field "event_id"`) || !strings.Contains(err.Error(), "allow_unsigned_event_id") {
		t.Fatalf("unsigned id header: %v, want a refusal naming the source, the field and the opt-in", err)
	}
	// A signed timestamp does not sign the id: still refused.
	_, err = Parse([]byte(`{"sources":{"acme":{` + base + `,"timestamp_header":"X-Ts","signed_content":"{timestamp}.{body}","event_id":{"header":"X-Event-Id"}}}}`))
	if err == nil || !strings.Contains(err.Error(), `field "event_id"`) {
		t.Fatalf("unsigned id header with a signed timestamp: %v, want a refusal", err)
	}
	_, err = Parse([]byte(`{"sources":{"acme":{` + base + `,"event_id":{"json":"id"},"allow_unsigned_event_id":true}}}`))
	if err == nil || !strings.Contains(err.Error(), `field "allow_unsigned_event_id"`) {
		t.Fatalf("opt-in without an unsigned header: %v, want a refusal", err)
	}

	set := mustParse(t, `{"sources":{
	 "optin":{`+base+`,"event_id":{"header":"X-Event-Id"},"allow_unsigned_event_id":true},
	 "signed":{`+base+`,"signed_content":"{id}.{body}","event_id":{"header":"X-Event-Id"}},
	 "body":{`+base+`,"event_id":{"json":"id"},"event_type":{"header":"X-Type"}}}}`)
	optin, _ := set.Lookup("optin")
	if !optin.GuardBody || !strings.Contains(optin.Warning, "X-Event-Id") || !strings.Contains(optin.Warning, "duplicate") {
		t.Fatalf("opted in: GuardBody %v, warning %q; want a guarded source and a warning saying what it risks", optin.GuardBody, optin.Warning)
	}
	for _, name := range []string{"signed", "body"} {
		src, _ := set.Lookup(name)
		if src.GuardBody || src.Warning != "" {
			t.Fatalf("%s: GuardBody %v, warning %q; want neither (the id is bound to the signature)", name, src.GuardBody, src.Warning)
		}
	}
}

// GuardBody is set exactly for the kinds whose event id the signature does
// not cover.
func TestGuardBodyByKind(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{
	 "stripe":{"kind":"stripe","secrets":["whsec_abcdefghijklmnopqrstuvwxyz"]},
	 "standard":{"kind":"standard","secrets":["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]},
	 "github":{"kind":"github","secrets":["sixteen-bytes!!!"]},
	 "square":{"kind":"square","secrets":["Ibxx_5AKakO-3qeNVR61Dw"],"notification_url":"https://example.com/w"},
	 "shopify":{"kind":"shopify","secrets":["sixteen-bytes!!!"]}}}`)
	want := map[string]bool{"stripe": false, "standard": false, "github": true, "square": false, "shopify": true}
	for name, guard := range want {
		src, _ := set.Lookup(name)
		if src.GuardBody != guard {
			t.Errorf("%s: GuardBody = %v, want %v", name, src.GuardBody, guard)
		}
	}
}
