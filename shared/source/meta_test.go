package source

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

const metaDoc = `{"sources":{"fb":{"kind":"meta","secrets":["It's a Secret to Everybody","meta-old-app-secret-0123"],"verify_tokens":["meta-verify-token-0123456789"]}}}`

// metaEvent is a WhatsApp Business message notification as Meta documents
// it.
const metaEvent = `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"messages":[{"from":"16505551234","id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=","timestamp":"1749416383","type":"text","text":{"body":"Does it come in another color?"}}]},"field":"messages"}]}]}`

// TestMetaDocumentedExample: Meta's X-Hub-Signature-256 is GitHub's
// header and HMAC; Meta publishes no example of its own, so GitHub's
// documented one (secret, payload, signature) is checked: the signature
// matches, and the payload, not JSON, is refused past it.
func TestMetaDocumentedExample(t *testing.T) {
	t.Parallel()
	src := lookup(t, metaDoc, "fb")
	_, err := src.Verifier.Verify(headers("X-Hub-Signature-256", githubDocSignature), []byte(githubDocPayload), now)
	if inbox.CauseOf(err) != inbox.CauseUnparsableBody {
		t.Fatalf("documented example: %v, want unparsable_body (past the signature)", err)
	}
	if h, _ := src.SignEvent([]byte(githubDocPayload), "", "", now); h.Get("X-Hub-Signature-256") != githubDocSignature {
		t.Fatalf("signed %v", h)
	}
}

func TestMetaVerify(t *testing.T) {
	t.Parallel()
	src := lookup(t, metaDoc, "fb")
	if !src.GuardBody {
		t.Fatal("meta signs no time: the captured-body guard must apply")
	}
	sig := func(body string) http.Header { h, _ := src.SignEvent([]byte(body), "", "", now); return h }
	messenger := `{"object":"page","entry":[{"id":"PAGE_ID","time":1458692752478,"messaging":[{"sender":{"id":"PSID"},"recipient":{"id":"PAGE_ID"},"message":{"mid":"m_1","text":"hi"}}]}]}`
	tests := []struct {
		name   string
		header http.Header
		body   string
		cause  inbox.Cause
		typ    string
	}{
		{"whatsapp", sig(metaEvent), metaEvent, "", "whatsapp_business_account.messages"},
		{"messenger, no changes", sig(messenger), messenger, "", "page"},
		{"no signature", http.Header{}, metaEvent, inbox.CauseSignatureMissing, ""},
		{"sha1 only", headers("X-Hub-Signature", "sha1=0123"), metaEvent, inbox.CauseSignatureMissing, ""},
		{"no sha256=", headers("X-Hub-Signature-256", strings.TrimPrefix(sig(metaEvent).Get("X-Hub-Signature-256"), "sha256=")), metaEvent, inbox.CauseSignatureMalformed, ""},
		{"tampered", sig(metaEvent), strings.Replace(metaEvent, "color", "colour", 1), inbox.CauseSignatureMismatch, ""},
		{"no object", sig(`{"entry":[]}`), `{"entry":[]}`, inbox.CauseInvalidEventType, ""},
		{"field not a string", sig(`{"object":"page","entry":[{"changes":[{"field":1}]}]}`), `{"object":"page","entry":[{"changes":[{"field":1}]}]}`, "", "page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.header, []byte(tt.body), now)
			if inbox.CauseOf(err) != tt.cause && !(err == nil && tt.cause == "") {
				t.Fatalf("got %v, want %q", err, tt.cause)
			}
			if err == nil && (id.EventID != bodyEventID([]byte(tt.body)) || id.EventType != tt.typ) {
				t.Fatalf("identity %+v, want type %s", id, tt.typ)
			}
		})
	}
}

func TestMetaHandshake(t *testing.T) {
	t.Parallel()
	src := lookup(t, metaDoc, "fb")
	get := func(q string) HandshakeRequest {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		return HandshakeRequest{Method: "GET", Query: v, Header: http.Header{}, Now: now}
	}
	ans, ok, err := src.Handshake(get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meta-verify-token-0123456789"))
	if err != nil {
		t.Fatalf("verification: %v", err)
	}
	if !field.Check(t, "verification",
		field.Eq("handled", ok, true),
		field.Eq("Body", string(ans.Body), "1158201444"),
		field.Is("ContentType", ans.ContentType, strings.HasPrefix(ans.ContentType, "text/plain"), "text/plain"),
	) {
		t.FailNow()
	}
	tests := []struct {
		query string
		cause inbox.Cause // "" with ok false: not a handshake
	}{
		{"hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-012345678", inbox.CauseSignatureMismatch},
		{"hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-0123456789x", inbox.CauseSignatureMismatch},
		{"hub.mode=subscribe&hub.challenge=1", inbox.CauseSignatureMissing},
		{"hub.mode=subscribe&hub.challenge=1&hub.verify_token=", inbox.CauseSignatureMissing},
		{"hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-0123456789&hub.verify_token=x", inbox.CauseSignatureMalformed},
		{"hub.mode=subscribe&hub.verify_token=meta-verify-token-0123456789", inbox.CauseInvalidRequest},
		{"hub.mode=subscribe&hub.challenge=%3Cscript%3E&hub.verify_token=meta-verify-token-0123456789", inbox.CauseInvalidRequest},
		{"hub.mode=subscribe&hub.challenge=1&hub.challenge=2&hub.verify_token=meta-verify-token-0123456789", inbox.CauseInvalidRequest},
		{"hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meta-verify-token-0123456789", ""},
		{"", ""},
	}
	for _, tt := range tests {
		_, ok, err := src.Handshake(get(tt.query))
		if ok || inbox.CauseOf(err) != tt.cause && !(err == nil && tt.cause == "") {
			t.Errorf("%s: %v %v, want %q", tt.query, ok, err, tt.cause)
		}
	}
	// A POST is a delivery, whatever its query.
	r := get("hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-0123456789")
	r.Method = "POST"
	if _, ok, err := src.Handshake(r); ok || err != nil {
		t.Fatalf("POST answered as a handshake: %v %v", ok, err)
	}
	// Without verify_tokens, nothing verifies.
	none := lookup(t, `{"sources":{"fb":{"kind":"meta","secrets":["meta-app-secret-0123456789"]}}}`, "fb")
	if _, _, err := none.Handshake(get("hub.mode=subscribe&hub.challenge=1&hub.verify_token=anything-at-all-0123")); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("no verify_tokens: %v", err)
	}
	// A short verify token is refused at start-up, without quoting it.
	_, err = Parse([]byte(`{"sources":{"fb":{"kind":"meta","secrets":["meta-app-secret-0123456789"],"verify_tokens":["short-tok"]}}}`))
	if err == nil || strings.Contains(err.Error(), "short-tok") || !strings.Contains(err.Error(), "verify_tokens") {
		t.Fatalf("short verify token: %v", err)
	}
}

func FuzzMetaVerify(f *testing.F) {
	src := fuzzSource(f, metaDoc, "fb")
	f.Add([]byte(metaEvent), "sha256=", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=meta-verify-token-0123456789", uint(0))
	f.Add([]byte(githubDocPayload), githubDocSignature, "hub.mode=subscribe&hub.challenge=%3C&hub.verify_token=x", uint(3))
	f.Add([]byte(`{"object":"\u001b","entry":[{"changes":[{"field":"\u009b"}]}]}`), "sha256=00", "hub.mode=subscribe;hub.challenge=1", uint(5))
	f.Fuzz(func(t *testing.T, body []byte, sig, query string, flip uint) {
		h := http.Header{"X-Hub-Signature-256": {sig}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		q, _ := url.ParseQuery(query)
		for _, m := range []string{"GET", "POST"} {
			checkHandshake(t, src, HandshakeRequest{Method: m, Query: q, Header: h, Body: body, Now: now})
		}
		fuzzRoundTrip(t, src, body, "", "", flip, 0, 0)
	})
}
