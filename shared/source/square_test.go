package source

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Square's published test vector: the one every official Square SDK
// (Node, Python, Ruby, PHP, Java) checks its WebhooksHelper against.
const (
	squareVectorBody      = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	squareVectorSignature = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
	squareVectorKey       = "Ibxx_5AKakO-3qeNVR61Dw"
	squareVectorURL       = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
)

func TestSquareSDKVectors(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"sq":{"kind":"square","secrets":["`+squareVectorKey+`"],"notification_url":"`+squareVectorURL+`"}}}`, "sq")
	id, err := src.Verifier.Verify(headers("x-square-hmacsha256-signature", squareVectorSignature), []byte(squareVectorBody), now)
	if err != nil {
		t.Fatalf("Square's SDK test vector does not verify: %v", err)
	}
	if id.EventID != "ac3ac95b-f97d-458c-a6e6-18981597e05f" || id.EventType != "webhooks.test_notification" {
		t.Fatalf("identity = %+v", id)
	}
	h, err := src.Sign([]byte(squareVectorBody), "", now)
	if err != nil || h.Get("X-Square-Hmacsha256-Signature") != squareVectorSignature {
		t.Fatalf("Sign = %q, %v; want Square's %q", h.Get("X-Square-Hmacsha256-Signature"), err, squareVectorSignature)
	}

	// The same SDK tests' refusals: another URL, another key, a body
	// re-formatted (as a JSON re-serialisation would).
	for name, doc := range map[string]string{
		"URL mismatch": `{"sources":{"sq":{"kind":"square","secrets":["` + squareVectorKey + `"],"notification_url":"https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9"}}}`,
		"key mismatch": `{"sources":{"sq":{"kind":"square","secrets":["MCmhFRxGX82xMwg5FsaoQA"],"notification_url":"` + squareVectorURL + `"}}}`,
	} {
		other := lookup(t, doc, "sq")
		_, err := other.Verifier.Verify(headers("X-Square-Hmacsha256-Signature", squareVectorSignature), []byte(squareVectorBody), now)
		if inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
			t.Fatalf("%s: %v", name, err)
		}
	}
	reformatted := strings.ReplaceAll(squareVectorBody, `":`, `": `)
	if _, err := src.Verifier.Verify(headers("X-Square-Hmacsha256-Signature", squareVectorSignature), []byte(reformatted), now); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("re-formatted body: %v", err)
	}

	// Square's Go SDK test vectors (published there as hex; Square sends
	// base64): the raw bytes are signed, escapes such as ">" included, so a
	// verifier that re-serialised the JSON would fail the second one. These
	// bodies carry no event_id: the signature passes, the identity does not.
	// Their key, "signature-key", is shorter than a source accepts
	// (MinSecretBytes), so the verifier is built directly.
	srcGo := &Source{Name: "sq", Kind: KindSquare, Verifier: &squareVerifier{keys: [][]byte{[]byte("signature-key")}, url: []byte("https://webhook.site/webhooks")}}
	for body, sig := range map[string]string{
		`{"data":{"type":"webhooks","id":"fake_id"}}`: "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=",
		`{"data":{"type":"webhooks","id":">id<"}}`:    "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
	} {
		_, err := srcGo.Verifier.Verify(headers("X-Square-Hmacsha256-Signature", sig), []byte(body), now)
		wantCause(t, err, inbox.CauseMissingEventID)
	}
}

func TestSquareVerify(t *testing.T) {
	t.Parallel()
	const url = "https://example.com/webhooks/square"
	set := mustParse(t, `{"sources":{
	 "sq":{"kind":"square","secrets":["sq-new-key_01234","sq-test-key_0123"],"notification_url":"`+url+`"},
	 "oldonly":{"kind":"square","secrets":["sq-test-key_0123"],"notification_url":"`+url+`"},
	 "other":{"kind":"square","secrets":["other-key_012345"],"notification_url":"`+url+`"},
	 "otherurl":{"kind":"square","secrets":["sq-new-key_01234"],"notification_url":"https://example.com/webhooks/square/"}}}`)
	src, _ := set.Lookup("sq")
	body := fixture(t, "square_order_created.json")
	// Signed by OpenSSL: printf %s URL | cat - square_order_created.json |
	// openssl dgst -sha256 -hmac sq-test-key_0123 -binary | base64
	const opensslSig = "PYjdHrDtDOm9sEpgYE0SYik+qSuYZcSU4UhD9Yl0Hc8="
	signWith := func(name string, b []byte) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.Sign(b, "", now)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	sig := func(b []byte) http.Header { return signWith("sq", b) }
	const hdr = "X-Square-Hmacsha256-Signature"
	tests := []struct {
		name string
		h    http.Header
		body []byte
		want inbox.Cause
	}{
		{"valid (signed by OpenSSL with the old key)", headers(hdr, opensslSig), body, ""},
		{"valid (signed by us with the new key)", sig(body), body, ""},
		{"rotated: old key only", signWith("oldonly", body), body, ""},
		{"lower-case header name", headers("x-square-hmacsha256-signature", opensslSig), body, ""},
		{"tampered body", headers(hdr, opensslSig), bytes.Replace(body, []byte(`"version":1`), []byte(`"version":2`), 1), inbox.CauseSignatureMismatch},
		{"trailing newline removed", headers(hdr, opensslSig), bytes.TrimRight(body, "\n"), inbox.CauseSignatureMismatch},
		{"wrong key", signWith("other", body), body, inbox.CauseSignatureMismatch},
		{"signed for another URL", signWith("otherurl", body), body, inbox.CauseSignatureMismatch},
		{"missing signature", headers("X-Square-Signature", "legacy-sha1"), body, inbox.CauseSignatureMissing},
		{"empty signature", headers(hdr, ""), body, inbox.CauseSignatureMissing},
		{"duplicated signature", headers(hdr, opensslSig, hdr, opensslSig), body, inbox.CauseSignatureMalformed},
		{"folded duplicate (proxy)", headers(hdr, opensslSig+", "+opensslSig), body, inbox.CauseSignatureMalformed},
		{"not base64", headers(hdr, "not base64!"), body, inbox.CauseSignatureMalformed},
		{"hex instead of base64", headers(hdr, strings.Repeat("ab", 32)), body, inbox.CauseSignatureMalformed},
		{"truncated", headers(hdr, opensslSig[:20]), body, inbox.CauseSignatureMalformed},
		{"signed non-JSON body", sig([]byte("event_id=1")), []byte("event_id=1"), inbox.CauseUnparsableBody},
		{"signed empty body", sig(nil), nil, inbox.CauseUnparsableBody},
		{"signed body without event_id", sig([]byte(`{"type":"order.created"}`)), []byte(`{"type":"order.created"}`), inbox.CauseMissingEventID},
		{"signed body with an empty event_id", sig([]byte(`{"event_id":""}`)), []byte(`{"event_id":""}`), inbox.CauseMissingEventID},
		{"signed numeric event_id", sig([]byte(`{"event_id":7}`)), []byte(`{"event_id":7}`), inbox.CauseUnparsableBody},
		{"signed event_id of 256 bytes", sig([]byte(`{"event_id":"` + strings.Repeat("x", 256) + `"}`)), []byte(`{"event_id":"` + strings.Repeat("x", 256) + `"}`), inbox.CauseMissingEventID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h, tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want == "" && (id.EventID != "116038d3-2948-439f-8679-fc86dbf80f69" || id.EventType != "order.created") {
				t.Fatalf("identity = %+v", id)
			}
		})
	}
}

func TestSquareNotificationURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		ok   bool
		want string
	}{
		{"https://example.com/webhooks/square", true, ""},
		{"https://example.com:8443/hooks?tenant=a", true, ""},
		{"http://127.0.0.1:3000/webhooks/square", true, ""},
		{"http://localhost:3000/webhooks/square", true, ""},
		{"http://[::1]:3000/webhooks/square", true, ""},
		{"", false, "is required"},
		{"http://example.com/webhooks/square", false, "must use https"},
		{"ftp://example.com/x", false, "must use https"},
		{"/webhooks/square", false, "absolute URL"},
		{"example.com/webhooks/square", false, "absolute URL"},
		{"https:///webhooks", false, "absolute URL"},
		{" https://example.com/x", false, "spaces"},
		{"https://user:pass@example.com/x", false, "credentials"},
		{"https://example.com/x#frag", false, "fragment"},
	}
	for _, tt := range tests {
		doc := `{"sources":{"sq":{"kind":"square","secrets":["k_0123456789abcd"],"notification_url":"` + tt.url + `"}}}`
		_, err := Parse([]byte(doc))
		if tt.ok {
			if err != nil {
				t.Errorf("%q: %v", tt.url, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), `source "sq": field "notification_url"`) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one naming the source, the field and %q", tt.url, err, tt.want)
		}
	}
}

func FuzzSquareVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"q":{"kind":"square","secrets":["`+squareVectorKey+`","sq-old_0123456789"],"notification_url":"`+squareVectorURL+`"}}}`, "q")
	f.Add([]byte(squareVectorBody), squareVectorSignature, uint(0))
	f.Add([]byte(`{"event_id":"","type":"x"}`), "====", uint(4))
	f.Add([]byte(`{"event_id":"a\u0000"}`), "AAAA", uint(2))
	f.Fuzz(func(t *testing.T, body []byte, sig string, flip uint) {
		id, err := src.Verifier.Verify(http.Header{"X-Square-Hmacsha256-Signature": {sig}}, body, now)
		checkOutcome(t, "arbitrary header", id, err)
		fuzzRoundTrip(t, src, body, "", "", flip, 0, 0)
	})
}
