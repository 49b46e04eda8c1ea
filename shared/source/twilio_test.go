package source

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// twilio-go's RequestValidator test vectors (client/request_validator_test.go,
// the official Go library): auth token "12345", this URL and these POST
// parameters give this signature; the http variant of the URL gives the
// second. The same URL, params and token are Twilio's own documented
// example ("Webhooks security").
const (
	twilioVectorToken   = "12345"
	twilioVectorURL     = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioVectorSig     = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	twilioVectorHTTPSig = "0ZXoZLH/DfblKGATFgpif+LLRf4="
	// The library's JSON vector: the URL with &bodySHA256=<hex of the
	// body's SHA-256> appended, no parameters.
	twilioVectorJSONBody = `{"property": "value", "boolean": true}`
	twilioVectorJSONSig  = "a9nBmqA0ju/hNViExpshrM61xv4="
)

// twilioVectorForm is the vector's parameters as Twilio posts them (the
// encoder's order; the signature sorts them).
var twilioVectorForm = url.Values{
	"Digits": {"1234"}, "CallSid": {"CA1234567890ABCDE"}, "To": {"+18005551212"},
	"Caller": {"+14158675309"}, "From": {"+14158675309"},
}.Encode()

// twilioDirect builds a twilio source with a verifier made directly: the
// vectors' token is shorter than a configured source accepts.
func twilioDirect(u, token string) *Source {
	return &Source{Name: "tw", Kind: KindTwilio, Verifier: &twilioVerifier{keys: [][]byte{[]byte(token)}, url: []byte(u)}}
}

func TestTwilioLibraryVectors(t *testing.T) {
	t.Parallel()
	src := twilioDirect(twilioVectorURL, twilioVectorToken)
	id, err := src.Verifier.Verify(headers("X-Twilio-Signature", twilioVectorSig), []byte(twilioVectorForm), now)
	if err != nil {
		t.Fatalf("twilio-go's vector does not verify: %v", err)
	}
	if len(id.EventID) != 32 || id.Metadata["twilio_sid"] != "CA1234567890ABCDE" || id.EventType != "" {
		t.Fatalf("identity = %+v", id)
	}
	h, err := src.Sign([]byte(twilioVectorForm), "", now)
	if err != nil || h.Get("X-Twilio-Signature") != twilioVectorSig || h.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("Sign = %v, %v; want Twilio's %q and a form content type", h, err, twilioVectorSig)
	}
	// The library checks the URL with and without the scheme's port; this
	// vector is of the URL with ":80", as configured here.
	httpSrc := twilioDirect(strings.Replace(strings.Replace(twilioVectorURL, "https", "http", 1), ".com", ".com:80", 1), twilioVectorToken)
	if _, err := httpSrc.Verifier.Verify(headers("X-Twilio-Signature", twilioVectorHTTPSig), []byte(twilioVectorForm), now); err != nil {
		t.Fatalf("the http vector: %v", err)
	}
	// The library's refusals: a wrong signature, another URL.
	if _, err := src.Verifier.Verify(headers("X-Twilio-Signature", twilioVectorHTTPSig), []byte(twilioVectorForm), now); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("another URL's signature: %v", err)
	}
	// A JSON delivery (bodySHA256) is refused, saying why, with its
	// content type and without.
	for _, h := range []http.Header{
		headers("X-Twilio-Signature", twilioVectorJSONSig, "Content-Type", "application/json"),
		headers("X-Twilio-Signature", twilioVectorJSONSig),
	} {
		_, err := src.Verifier.Verify(h, []byte(twilioVectorJSONBody), now)
		if inbox.CauseOf(err) != inbox.CauseSignatureMismatch || !strings.Contains(err.Error(), "bodySHA256") {
			t.Fatalf("JSON delivery: %v, want a refusal naming bodySHA256", err)
		}
	}
}

func TestTwilioVerify(t *testing.T) {
	t.Parallel()
	const u = "https://example.com/webhooks/twilio?tenant=a"
	set := mustParse(t, `{"sources":{
	 "tw":{"kind":"twilio","secrets":["0123456789abcdef0123456789abcdef","fedcba9876543210fedcba9876543210"],"url":"`+u+`"},
	 "oldonly":{"kind":"twilio","secrets":["fedcba9876543210fedcba9876543210"],"url":"`+u+`"},
	 "other":{"kind":"twilio","secrets":["ffffffffffffffffffffffffffffffff"],"url":"`+u+`"},
	 "otherurl":{"kind":"twilio","secrets":["0123456789abcdef0123456789abcdef"],"url":"https://example.com/webhooks/twilio?tenant=b"},
	 "typed":{"kind":"twilio","secrets":["0123456789abcdef0123456789abcdef"],"url":"`+u+`","event_type":"sms.status"}}}`)
	src, _ := set.Lookup("tw")
	form := []byte("AccountSid=AC0000&MessageSid=SM0123&MessageStatus=delivered&To=%2B15005550001&Body=caf%C3%A9+ok")
	signWith := func(name string, b []byte) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.Sign(b, "", now)
		if err != nil {
			t.Fatal(err)
		}
		h.Set("I-Twilio-Idempotency-Token", "idem-1")
		return h
	}
	sig := func(b []byte) http.Header { return signWith("tw", b) }
	good := sig(form)
	want, err := src.Verifier.Verify(good, form, now)
	if err != nil {
		t.Fatal(err)
	}
	if !field.Check(t, "identity",
		field.Is("EventID", want.EventID, len(want.EventID) == 32, "32 characters"),
		field.Eq("EventType", want.EventType, "message.delivered"),
		field.Eq(`Metadata["twilio_sid"]`, want.Metadata["twilio_sid"], "SM0123"),
		field.Eq(`Metadata["twilio_account_sid"]`, want.Metadata["twilio_account_sid"], "AC0000"),
		field.Eq(`Metadata["twilio_idempotency_token"]`, want.Metadata["twilio_idempotency_token"], "idem-1"),
	) {
		t.FailNow()
	}
	const hdr = "X-Twilio-Signature"
	withSig := func(v string, more ...string) http.Header { return headers(append([]string{hdr, v}, more...)...) }
	sigValue := good.Get(hdr)
	tests := []struct {
		name string
		h    http.Header
		body []byte
		want inbox.Cause
	}{
		{"valid", good, form, ""},
		{"rotated: old token only", signWith("oldonly", form), form, ""},
		// The parameters are signed, not their encoding: reordered and
		// re-encoded, the form is the same event.
		{"reordered and re-encoded", good, []byte("To=%2b15005550001&Body=caf%c3%a9%20ok&MessageStatus=delivered&MessageSid=SM0123&AccountSid=AC0000"), ""},
		{"a value changed", good, bytes.Replace(form, []byte("delivered"), []byte("undelivered"), 1), inbox.CauseSignatureMismatch},
		{"a parameter added", good, append(bytes.Clone(form), "&Extra=1"...), inbox.CauseSignatureMismatch},
		{"a parameter removed", good, form[:bytes.LastIndexByte(form, '&')], inbox.CauseSignatureMismatch},
		{"wrong token", signWith("other", form), form, inbox.CauseSignatureMismatch},
		{"signed for another URL", signWith("otherurl", form), form, inbox.CauseSignatureMismatch},
		{"missing signature", headers("I-Twilio-Idempotency-Token", "x"), form, inbox.CauseSignatureMissing},
		{"empty signature", withSig(""), form, inbox.CauseSignatureMissing},
		{"duplicated signature", withSig(sigValue, hdr, sigValue), form, inbox.CauseSignatureMalformed},
		{"not base64", withSig("not base64!"), form, inbox.CauseSignatureMalformed},
		{"a SHA-256 sized signature", withSig(strings.Repeat("A", 44)), form, inbox.CauseSignatureMalformed},
		{"JSON content type", withSig(sigValue, "Content-Type", "application/json; charset=utf-8"), form, inbox.CauseSignatureMismatch},
		{"JSON body", withSig(sigValue), []byte(`{"MessageSid":"SM0123"}`), inbox.CauseSignatureMismatch},
		{"invalid escape", withSig(sigValue), []byte("MessageSid=SM%G1"), inbox.CauseSignatureMismatch},
		{"pair without =", withSig(sigValue), []byte("MessageSid"), inbox.CauseSignatureMismatch},
		{"empty pair", withSig(sigValue), []byte("a=1&&b=2"), inbox.CauseSignatureMismatch},
		{"empty name", withSig(sigValue), []byte("=1"), inbox.CauseSignatureMismatch},
		{"two =", withSig(sigValue), []byte("a=1=2"), inbox.CauseSignatureMismatch},
		{"raw space", withSig(sigValue), []byte("Body=a b"), inbox.CauseSignatureMismatch},
		{"semicolon", withSig(sigValue), []byte("a=1;b=2"), inbox.CauseSignatureMismatch},
		{"raw UTF-8", withSig(sigValue), []byte("Body=café"), inbox.CauseSignatureMismatch},
		{"NUL", withSig(sigValue), []byte("Body=\x00"), inbox.CauseSignatureMismatch},
		{"signed empty form", sig(nil), nil, inbox.CauseMissingEventID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h, tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want == "" && (id.EventID != want.EventID || id.EventType != want.EventType) {
				t.Fatalf("identity = %+v, want %+v", id, want)
			}
		})
	}
	typed, _ := set.Lookup("typed")
	if id, err := typed.Verifier.Verify(signWith("typed", form), form, now); err != nil || id.EventType != "sms.status" || id.EventID != want.EventID {
		t.Fatalf("configured type: %+v, %v", id, err)
	}

	// Twilio's scheme delimits neither a name from its value nor a pair
	// from the next: bytes moved across them keep the signature. The id
	// is the signed string's, so such a form is the same event (a
	// duplicate), never a new one made from a captured delivery.
	for _, shifted := range []string{
		strings.Replace(string(form), "MessageStatus=delivered", "MessageStatusd=elivered", 1),
		strings.Replace(string(form), "MessageSid=SM0123&MessageStatus=", "MessageSidSM0123MessageStatus=", 1),
	} {
		id, err := src.Verifier.Verify(good, []byte(shifted), now)
		if err != nil || id.EventID != want.EventID {
			t.Fatalf("%s: %+v, %v; want the signed delivery's id %s", shifted, id, err, want.EventID)
		}
	}
}

// The id and type follow the parameters: one id for one parameter set
// (whatever its order), another for any other, and a type from the first
// of EventType, MessageStatus, SmsStatus and CallStatus.
func TestTwilioIdentity(t *testing.T) {
	t.Parallel()
	v := &twilioVerifier{keys: [][]byte{[]byte("0123456789abcdef")}, url: []byte("https://example.com/t")}
	ident := func(body string) inbox.Identity {
		t.Helper()
		params, err := parseForm([]byte(body))
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		id, err := checkIdentity(v.identity(params, nil))
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		return id
	}
	cases := []struct{ body, sid, typ string }{
		{"CallSid=CA1&CallStatus=completed", "CA1", "call.completed"},
		{"SmsSid=SM2&SmsStatus=received", "SM2", "message.received"},
		{"MessageSid=SM3&SmsSid=SM3&SmsStatus=received&MessageStatus=sent", "SM3", "message.sent"},
		{"EventType=onMessageAdded&ConversationSid=CH1", "", "onMessageAdded"},
		{"Foo=bar", "", ""},
		{"MessageSid=SM3&MessageStatus=delivered", "SM3", "message.delivered"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		id := ident(c.body)
		if len(id.EventID) != 32 || id.Metadata["twilio_sid"] != c.sid || id.EventType != c.typ {
			t.Errorf("%q: identity %+v, want a 32-digit id, SID %q and type %q", c.body, id, c.sid, c.typ)
		}
		if seen[id.EventID] {
			t.Errorf("%q: id %s seen before", c.body, id.EventID)
		}
		seen[id.EventID] = true
	}
	if a, b := ident("CallSid=CA1&CallStatus=completed"), ident("CallStatus=completed&CallSid=CA1"); a.EventID != b.EventID {
		t.Errorf("reordered: %s, %s", a.EventID, b.EventID)
	}
	// What the signature cannot tell apart has one id; what it can, two.
	for _, pair := range [][2]string{{"ab=c", "a=bc"}, {"a=1&b=23", "a=1&b2=3"}} {
		if ident(pair[0]).EventID != ident(pair[1]).EventID {
			t.Errorf("%q and %q have one signature but two ids", pair[0], pair[1])
		}
	}
	if ident("a=1&b=2").EventID == ident("a=1&b=3").EventID {
		t.Error("two parameter sets share an id")
	}
}

func TestTwilioURLRequired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ opts, want string }{
		{`"secrets":["0123456789abcdef0123456789abcdef"]`, "is required"},
		{`"secrets":["0123456789abcdef0123456789abcdef"],"url":"http://example.com/t"`, "must use https"},
		{`"secrets":["short"],"url":"https://example.com/t"`, `field "secrets"`},
		{`"secrets":["0123456789abcdef0123456789abcdef"],"url":"https://example.com/t","event_type":"a\u0007"`, `field "event_type"`},
	} {
		_, err := Parse([]byte(`{"sources":{"tw":{"kind":"twilio",` + tc.opts + `}}}`))
		if err == nil || !strings.Contains(err.Error(), `source "tw"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
}

// FuzzTwilioVerify: any body and signature header gives a verifier cause
// or a storable identity; a form built from arbitrary names and values,
// signed as Twilio signs it, verifies; one byte changed either fails or
// still encodes the very same parameters (the same identity).
func FuzzTwilioVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"tw":{"kind":"twilio","secrets":["0123456789abcdef0123456789abcdef","fedcba9876543210fedcba9876543210"],"url":"https://example.com/t?x=1"}}}`, "tw")
	f.Add([]byte(twilioVectorForm), twilioVectorSig, "MessageSid", "SM1", "Body", "café +&=%", uint(3))
	f.Add([]byte("a=%zz&b"), "AAAA", "", "", "x", "\x00", uint(0))
	f.Add([]byte(`{"a":1}`), "====", "a", "1", "a", "2", uint(7))
	f.Fuzz(func(t *testing.T, body []byte, sig, n1, v1, n2, v2 string, flip uint) {
		id, err := src.Verifier.Verify(http.Header{"X-Twilio-Signature": {sig}}, body, now)
		checkOutcome(t, "arbitrary header", id, err)

		vals := url.Values{}
		for _, kv := range [][2]string{{n1, v1}, {n2, v2}} {
			if kv[0] != "" {
				vals.Add(kv[0], kv[1])
			}
		}
		form := []byte(vals.Encode())
		h, err := src.SignEvent(form, "", "", now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := src.Verifier.Verify(h.Clone(), form, now)
		checkOutcome(t, "signed", got, err)
		if len(vals) > 0 && err != nil && !pastSignature(err) {
			t.Fatalf("our own signature over %q is refused: %v", form, err)
		}
		if len(form) == 0 || err != nil {
			return
		}
		tampered := bytes.Clone(form)
		i := int(flip % uint(len(tampered)))
		tampered[i] ^= byte(flip>>8)%255 + 1
		tid, terr := src.Verifier.Verify(h.Clone(), tampered, now)
		if terr == nil && tid.EventID != got.EventID {
			t.Fatalf("a tampered form %q verifies as another event %q (was %q)", tampered, tid.EventID, got.EventID)
		}
	})
}
