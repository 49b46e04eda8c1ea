package source

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// The generic kind, configured as GitHub's scheme, verifies GitHub's
// documented example.
func TestHMACAsGitHubDocumentedExample(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"h":{"kind":"hmac","secrets":["It's a Secret to Everybody"],
	 "signature_header":"X-Hub-Signature-256","signature_prefix":"sha256=",
	 "event_id":{"header":"X-GitHub-Delivery"},"event_type":{"header":"X-GitHub-Event"},"allow_unsigned_event_id":true}}}`, "h")
	id, err := src.Verifier.Verify(headers("X-Hub-Signature-256", githubDocSignature, "X-GitHub-Delivery", "d-1", "X-GitHub-Event", "ping"), []byte(githubDocPayload), now)
	if err != nil || id.EventID != "d-1" || id.EventType != "ping" {
		t.Fatalf("identity %+v, %v", id, err)
	}
}

// The generic kind, configured as Standard Webhooks (base64: key, {id} and
// {timestamp} in the signed content, "v1," prefix), verifies the Standard
// Webhooks specification's test vector.
func TestHMACAsStandardWebhooksSpecVector(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"h":{"kind":"hmac","secrets":["base64:`+strings.TrimPrefix(specSecret, "whsec_")+`"],
	 "signature_header":"webhook-signature","signature_prefix":"v1,","encoding":"base64",
	 "timestamp_header":"webhook-timestamp","signed_content":"{id}.{timestamp}.{body}",
	 "event_id":{"header":"webhook-id"}}}}`, "h")
	h := headers("webhook-id", specID, "webhook-timestamp", specTimestamp, "webhook-signature", specSignature)
	at, _ := strconv.ParseInt(specTimestamp, 10, 64)
	id, err := src.Verifier.Verify(h, []byte(specBody), time.Unix(at, 0))
	if err != nil || id.EventID != specID {
		t.Fatalf("identity %+v, %v", id, err)
	}
	signed, err := src.Sign([]byte(specBody), specID, time.Unix(at, 0))
	if err != nil || signed.Get("Webhook-Signature") != specSignature {
		t.Fatalf("Sign = %q, %v; want %q", signed.Get("Webhook-Signature"), err, specSignature)
	}
	// {id} is signed: another id is a mismatch, a missing or repeated one
	// cannot be verified at all.
	for name, tc := range map[string]struct {
		edit func(http.Header)
		want inbox.Cause
	}{
		"tampered id":   {func(h http.Header) { h.Set("webhook-id", "msg_other") }, inbox.CauseSignatureMismatch},
		"missing id":    {func(h http.Header) { h.Del("webhook-id") }, inbox.CauseSignatureMalformed},
		"duplicated id": {func(h http.Header) { h.Add("webhook-id", specID) }, inbox.CauseSignatureMalformed},
		"stale":         {func(http.Header) {}, inbox.CauseTimestampOutOfTolerance},
	} {
		h := headers("webhook-id", specID, "webhook-timestamp", specTimestamp, "webhook-signature", specSignature)
		tc.edit(h)
		clock := time.Unix(at, 0)
		if name == "stale" {
			clock = clock.Add(301 * time.Second)
		}
		_, err := src.Verifier.Verify(h, []byte(specBody), clock)
		if inbox.CauseOf(err) != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
	}
}

// hmacDoc is a SHA-512, base64, timestamped source reading its identity
// from JSON paths; "oldonly" and "other" hold one secret each.
const hmacDoc = `{"sources":{
 "h":{"kind":"hmac","secrets":["hmac-new-secret_","hmac-test-secret"],"signature_header":"X-Signature",
      "algorithm":"sha512","encoding":"base64","timestamp_header":"X-Timestamp","signed_content":"{timestamp}.{body}",
      "event_id":{"json":"meta.event.id"},"event_type":{"json":"meta.event.kind"}},
 "oldonly":{"kind":"hmac","secrets":["hmac-test-secret"],"signature_header":"X-Signature",
      "algorithm":"sha512","encoding":"base64","timestamp_header":"X-Timestamp","signed_content":"{timestamp}.{body}",
      "event_id":{"json":"meta.event.id"},"event_type":{"json":"meta.event.kind"}},
 "other":{"kind":"hmac","secrets":["base64:b3RoZXItMDEyMzQ1Njc4OQ=="],"signature_header":"X-Signature",
      "algorithm":"sha512","encoding":"base64","timestamp_header":"X-Timestamp","signed_content":"{timestamp}.{body}",
      "event_id":{"json":"meta.event.id"},"event_type":{"json":"meta.event.kind"}}}}`

// hmacOpenSSLSig is testdata/hmac_nested.json signed by OpenSSL at
// 1700000000 (the tests' clock): printf %s 1700000000. | cat -
// hmac_nested.json | openssl dgst -sha512 -hmac hmac-test-secret -binary |
// base64 -w0
const hmacOpenSSLSig = "NJnxLEhJSwHpnL9R20aeuGg5YmNWyovFiPUJY2liUFqmBaBogvkqcIPR58dlXf7lqIX/OBOiTTHMN1UNqIqSjQ=="

func TestHMACVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, hmacDoc)
	src, _ := set.Lookup("h")
	body := fixture(t, "hmac_nested.json")
	ts := strconv.FormatInt(now.Unix(), 10)
	signWith := func(name string, b []byte, at time.Time) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.Sign(b, "", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	good := func() http.Header { return headers("X-Signature", hmacOpenSSLSig, "X-Timestamp", ts) }
	with := func(edit func(http.Header)) http.Header { h := good(); edit(h); return h }
	signed := func(b string) (http.Header, []byte) { return signWith("h", []byte(b), now), []byte(b) }
	nonJSONh, nonJSON := signed("id=1")
	noIDh, noID := signed(`{"meta":{"event":{"kind":"x"}}}`)
	numIDh, numID := signed(`{"meta":{"event":{"id":12}}}`)
	notObjh, notObj := signed(`{"meta":"flat"}`)
	badTypeh, badType := signed(`{"meta":{"event":{"id":"a","kind":["x"]}}}`)

	tests := []struct {
		name string
		h    http.Header
		body []byte
		want inbox.Cause
	}{
		{"valid (OpenSSL, old secret)", good(), body, ""},
		{"valid (signed by us, new secret)", signWith("h", body, now), body, ""},
		{"rotated: old secret only", signWith("oldonly", body, now), body, ""},
		{"edge of tolerance, past", signWith("h", body, now.Add(-300*time.Second)), body, ""},
		{"edge of tolerance, future", signWith("h", body, now.Add(300*time.Second)), body, ""},
		{"tampered body", good(), bytes.Replace(body, []byte("1250"), []byte("9250"), 1), inbox.CauseSignatureMismatch},
		{"tampered timestamp", with(func(h http.Header) { h.Set("X-Timestamp", strconv.FormatInt(now.Unix()+1, 10)) }), body, inbox.CauseSignatureMismatch},
		{"wrong secret", signWith("other", body, now), body, inbox.CauseSignatureMismatch},
		{"stale", signWith("h", body, now.Add(-301*time.Second)), body, inbox.CauseTimestampOutOfTolerance},
		{"future", signWith("h", body, now.Add(301*time.Second)), body, inbox.CauseTimestampOutOfTolerance},
		{"missing signature", with(func(h http.Header) { h.Del("X-Signature") }), body, inbox.CauseSignatureMissing},
		{"duplicated signature", with(func(h http.Header) { h.Add("X-Signature", hmacOpenSSLSig) }), body, inbox.CauseSignatureMalformed},
		{"garbled signature", with(func(h http.Header) { h.Set("X-Signature", "***") }), body, inbox.CauseSignatureMalformed},
		{"SHA-256-sized signature", with(func(h http.Header) { h.Set("X-Signature", hmacOpenSSLSig[:44]) }), body, inbox.CauseSignatureMalformed},
		{"missing timestamp", with(func(h http.Header) { h.Del("X-Timestamp") }), body, inbox.CauseSignatureMalformed},
		{"duplicated timestamp", with(func(h http.Header) { h.Add("X-Timestamp", ts) }), body, inbox.CauseSignatureMalformed},
		{"garbled timestamp", with(func(h http.Header) { h.Set("X-Timestamp", "2023-11-14T22:13:20Z") }), body, inbox.CauseSignatureMalformed},
		{"negative timestamp", with(func(h http.Header) { h.Set("X-Timestamp", "-1") }), body, inbox.CauseSignatureMalformed},
		{"signed non-JSON body", nonJSONh, nonJSON, inbox.CauseUnparsableBody},
		{"signed body without the id path", noIDh, noID, inbox.CauseMissingEventID},
		{"signed numeric id", numIDh, numID, inbox.CauseUnparsableBody},
		{"signed body where the path is not an object", notObjh, notObj, inbox.CauseMissingEventID},
		{"signed non-string type", badTypeh, badType, inbox.CauseUnparsableBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h, tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want == "" && (id.EventID != "ev_01HZX3K9" || id.EventType != "payment.settled") {
				t.Fatalf("identity = %+v", id)
			}
		})
	}
}

// A hex source with a prefix, no timestamp and the id in headers.
func TestHMACHexPrefixHeaders(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"h":{"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","signature_prefix":"sha256=",
	 "event_id":{"header":"X-Event-Id"},"event_type":{"header":"X-Event-Type"},"allow_unsigned_event_id":true}}}`, "h")
	body := []byte(`not JSON at all`)
	h, err := src.SignEvent(body, "evt_1", "thing.happened", now)
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Event-Id") != "evt_1" || h.Get("X-Event-Type") != "thing.happened" || !strings.HasPrefix(h.Get("X-Sig"), "sha256=") {
		t.Fatalf("signed headers = %v", h)
	}
	// No timestamp: any clock verifies.
	id, err := src.Verifier.Verify(h, body, now.Add(1000*time.Hour))
	if err != nil || id.EventID != "evt_1" || id.EventType != "thing.happened" {
		t.Fatalf("identity = %+v, %v", id, err)
	}
	for name, tc := range map[string]struct {
		edit func(http.Header)
		want inbox.Cause
	}{
		"prefix missing": {func(h http.Header) { h.Set("X-Sig", strings.TrimPrefix(h.Get("X-Sig"), "sha256=")) }, inbox.CauseSignatureMalformed},
		"upper-case hex": {func(h http.Header) {
			h.Set("X-Sig", "sha256="+strings.ToUpper(strings.TrimPrefix(h.Get("X-Sig"), "sha256=")))
		}, ""},
		"id missing":         {func(h http.Header) { h.Del("X-Event-Id") }, inbox.CauseMissingEventID},
		"id duplicated":      {func(h http.Header) { h.Add("X-Event-Id", "evt_2") }, inbox.CauseMissingEventID},
		"type duplicated":    {func(h http.Header) { h.Add("X-Event-Type", "b") }, inbox.CauseInvalidEventType},
		"id not signed here": {func(h http.Header) { h.Set("X-Event-Id", "evt_9") }, ""},
	} {
		hh := h.Clone()
		tc.edit(hh)
		_, err := src.Verifier.Verify(hh, body, now)
		if inbox.CauseOf(err) != tc.want && !(tc.want == "" && err == nil) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestHMACConfigErrors(t *testing.T) {
	t.Parallel()
	base := `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"header":"X-Id"}`
	tests := []struct{ name, opts, field, want string }{
		{"no signature header", `"kind":"hmac","secrets":["k_0123456789abcd"],"event_id":{"header":"X-Id"}`, "signature_header", "is required"},
		{"bad signature header", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X Sig","event_id":{"header":"X-Id"}`, "signature_header", "not a valid header name"},
		{"no secrets", `"kind":"hmac","signature_header":"X-Sig","event_id":{"header":"X-Id"}`, "secrets", "at least one"},
		{"bad base64 secret", `"kind":"hmac","secrets":["base64:***"],"signature_header":"X-Sig","event_id":{"header":"X-Id"}`, "secrets", "secret #1 has the base64: prefix"},
		{"unknown algorithm", base + `,"algorithm":"md5"`, "algorithm", `"sha256" or "sha512"`},
		{"sha1 refused", base + `,"algorithm":"sha1"`, "algorithm", `"sha256" or "sha512"`},
		{"unknown encoding", base + `,"encoding":"base32"`, "encoding", `"hex" or "base64"`},
		{"prefix with spaces", base + `,"signature_prefix":" v1="`, "signature_prefix", "printable"},
		{"bad timestamp header", base + `,"timestamp_header":"X:T","signed_content":"{timestamp}.{body}"`, "timestamp_header", "not a valid header name"},
		{"timestamp header is the signature header", base + `,"timestamp_header":"x-sig","signed_content":"{timestamp}.{body}"`, "timestamp_header", "must differ"},
		{"timestamp without template", base + `,"timestamp_header":"X-Ts"`, "signed_content", "is required with timestamp_header"},
		{"timestamp not signed", base + `,"timestamp_header":"X-Ts","signed_content":"{body}"`, "signed_content", "must use {timestamp}"},
		{"{timestamp} without header", base + `,"signed_content":"{timestamp}.{body}"`, "signed_content", "timestamp_header is not set"},
		{"no {body}", base + `,"signed_content":"{id}"`, "signed_content", "{body} exactly once"},
		{"{body} twice", base + `,"signed_content":"{body}{body}"`, "signed_content", "{body} exactly once"},
		{"{id} twice", base + `,"signed_content":"{id}{id}{body}"`, "signed_content", "at most once"},
		{"unknown placeholder", base + `,"signed_content":"{ts}.{body}"`, "signed_content", `unknown placeholder "{ts}"`},
		{"unclosed brace", base + `,"signed_content":"{body"`, "signed_content", "without '}'"},
		{"stray brace", base + `,"signed_content":"}{body}"`, "signed_content", "without '{'"},
		{"{id} with a JSON id", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"json":"id"},"signed_content":"{id}.{body}"`, "signed_content", "needs event_id to be a header"},
		{"tolerance without timestamp", base + `,"tolerance_seconds":60`, "tolerance_seconds", "no effect without timestamp_header"},
		{"negative tolerance", base + `,"timestamp_header":"X-Ts","signed_content":"{timestamp}{body}","tolerance_seconds":-5`, "tolerance_seconds", "must be positive"},
		{"no event id", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig"`, "event_id", "is required"},
		{"empty event id", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{}`, "event_id", `must be {"header"`},
		{"both header and json", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"header":"X-Id","json":"id"}`, "event_id", "not both"},
		{"bad id header", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"header":"X Id"}`, "event_id.header", "not a valid header name"},
		{"id header is the signature header", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"header":"X-SIG"}`, "event_id.header", "must differ"},
		{"bad id path", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"json":"data..id"}`, "event_id.json", "empty key"},
		{"bad type path", base + `,"event_type":{"json":".type"}`, "event_type.json", "empty key"},
		{"path too deep", `"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","event_id":{"json":"` + strings.Repeat("a.", 16) + `a"}`, "event_id.json", "at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`{"sources":{"h":{` + tt.opts + `}}}`))
			want := `source "h": field "` + tt.field + `"`
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want it to contain %q and %q", err, want, tt.want)
			}
			if strings.Contains(err.Error(), "***") && tt.field == "secrets" {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
	// Typos in nested objects fail too.
	_, err := Parse([]byte(`{"sources":{"h":{` + base[:len(base)-len(`"event_id":{"header":"X-Id"}`)] + `"event_id":{"headers":"X-Id"}}}}`))
	if err == nil || !strings.Contains(err.Error(), `unknown field "headers"`) {
		t.Fatalf("nested typo: %v", err)
	}
}

// hmacFuzzDocs are the fixed configurations FuzzHMACVerify picks from; the
// fuzzer also tries its own signed_content template on a hex source.
var hmacFuzzDocs = []string{
	hmacDoc,
	`{"sources":{"h":{"kind":"hmac","secrets":["base64:` + specSecret[len("whsec_"):] + `"],"signature_header":"webhook-signature","signature_prefix":"v1,","encoding":"base64",
	  "timestamp_header":"webhook-timestamp","signed_content":"{id}.{timestamp}.{body}","event_id":{"header":"webhook-id"}}}}`,
	`{"sources":{"h":{"kind":"hmac","secrets":["k1_0123456789abc","k2_0123456789abc"],"signature_header":"X-Sig","signature_prefix":"sha256=",
	  "event_id":{"header":"X-Event-Id"},"event_type":{"header":"X-Event-Type"},"allow_unsigned_event_id":true}}}`,
}

func FuzzHMACVerify(f *testing.F) {
	var srcs []*Source
	for _, doc := range hmacFuzzDocs {
		srcs = append(srcs, fuzzSource(f, doc, "h"))
	}
	f.Add([]byte(`{"meta":{"event":{"id":"ev_1","kind":"k"}}}`), hmacOpenSSLSig, "1700000000", "ev_1", int64(0), uint(0), uint8(0), "{timestamp}.{body}")
	f.Add([]byte(specBody), specSignature, specTimestamp, specID, int64(0), uint(1), uint8(1), "{id}:{body}")
	f.Add([]byte(`{}`), "sha256=00", "", "evt", int64(0), uint(2), uint8(2), "{body}")
	f.Add([]byte(`{}`), "", "x", "", int64(0), uint(2), uint8(2), "{{body}}")
	f.Fuzz(func(t *testing.T, body []byte, sig, ts, eventID string, skew int64, flip uint, pick uint8, tmpl string) {
		src := srcs[int(pick)%len(srcs)]
		v := src.Verifier.(*hmacVerifier)
		h := http.Header{}
		h.Set(v.signatureHeader, sig)
		if v.timestampHeader != "" {
			h.Set(v.timestampHeader, ts)
		}
		if v.id.header != "" {
			h.Set(v.id.header, eventID)
		}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		tol := time.Duration(0)
		if v.timestampHeader != "" {
			tol = v.tol
		}
		fuzzRoundTrip(t, src, body, eventID, "type", flip, skew, tol)

		// A fuzzed template: a valid one must sign {body} exactly once.
		tj, _ := json.Marshal(tmpl)
		doc := `{"sources":{"t":{"kind":"hmac","secrets":["k_0123456789abcd"],"signature_header":"X-Sig","timestamp_header":"X-Ts",
		  "signed_content":` + string(tj) + `,"event_id":{"header":"X-Id"}}}}`
		set, perr := Parse([]byte(doc))
		if perr != nil {
			return
		}
		tsrc, _ := set.Lookup("t")
		var bodies int
		for _, s := range tsrc.Verifier.(*hmacVerifier).content {
			if s.kind == segBody {
				bodies++
			}
		}
		if bodies != 1 {
			t.Fatalf("template %q accepted with {body} %d times", tmpl, bodies)
		}
		fuzzRoundTrip(t, tsrc, body, eventID, "", flip, skew, DefaultTolerance)
	})
}
