package source

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Fuzz targets, one per verifier and one for the id/type extraction. Each
// checks that nothing panics and these invariants:
//   - every refusal carries a verifier cause (never "internal");
//   - an accepted delivery has a 1..255-byte printable UTF-8 id, a bounded
//     printable type, and storable metadata;
//   - what our signer signed never fails as signature_mismatch, nor as
//     out of tolerance at the signing time;
//   - a signed body with one byte changed never verifies;
//   - a signed delivery checked at a clock beyond the tolerance never
//     verifies.
// `make test` runs each for a few seconds (scripts/fuzz-smoke.sh); plain
// `go test` runs the seeds and testdata/fuzz corpora.

var verifierCauses = map[inbox.Cause]bool{
	inbox.CauseSignatureMissing:        true,
	inbox.CauseSignatureMalformed:      true,
	inbox.CauseSignatureMismatch:       true,
	inbox.CauseTimestampOutOfTolerance: true,
	inbox.CauseUnparsableBody:          true,
	inbox.CauseMissingEventID:          true,
	inbox.CauseInvalidEventType:        true,
}

// pastSignature reports whether err came after the signature matched.
func pastSignature(err error) bool {
	switch inbox.CauseOf(err) {
	case inbox.CauseUnparsableBody, inbox.CauseMissingEventID, inbox.CauseInvalidEventType:
		return true
	}
	return false
}

// checkOutcome enforces the invariants on one Verify result.
func checkOutcome(t *testing.T, what string, id inbox.Identity, err error) {
	t.Helper()
	if err != nil {
		if !verifierCauses[inbox.CauseOf(err)] {
			t.Fatalf("%s: refusal without a verifier cause: %v", what, err)
		}
		return
	}
	if id.EventID == "" || len(id.EventID) > inbox.MaxEventIDBytes || !utf8.ValidString(id.EventID) || !printable(id.EventID) {
		t.Fatalf("%s: accepted an unusable event id %q", what, id.EventID)
	}
	if len(id.EventType) > inbox.MaxEventTypeBytes || !printable(id.EventType) {
		t.Fatalf("%s: accepted an unusable event type %q", what, id.EventType)
	}
	for k, v := range id.Metadata {
		if v == "" || len(v) > inbox.MaxEventIDBytes || !printable(v) {
			t.Fatalf("%s: metadata %s=%q cannot be stored", what, k, v)
		}
	}
}

// fuzzRoundTrip signs body as src's sender would and checks our verifier
// against it, against the body with one byte changed, and at clock skew.
func fuzzRoundTrip(t *testing.T, src *Source, body []byte, eventID, eventType string, flip uint, skew int64, tolerance time.Duration) {
	t.Helper()
	h, err := src.SignEvent(body, eventID, eventType, now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := src.Verifier.Verify(h.Clone(), body, now)
	checkOutcome(t, "signed", id, err)
	switch inbox.CauseOf(err) {
	case inbox.CauseSignatureMismatch, inbox.CauseTimestampOutOfTolerance:
		t.Fatalf("our own signature is refused: %v", err)
	}
	signatureOK := err == nil || pastSignature(err)

	if len(body) > 0 {
		tampered := bytes.Clone(body)
		i := int(flip % uint(len(tampered)))
		tampered[i] ^= byte(flip>>8)%255 + 1 // never 0: the byte changes
		_, terr := src.Verifier.Verify(h.Clone(), tampered, now)
		if terr == nil {
			t.Fatalf("a tampered body verifies (byte %d)", i)
		}
		if signatureOK && inbox.CauseOf(terr) != inbox.CauseSignatureMismatch {
			t.Fatalf("a tampered body gives %v, want signature_mismatch", terr)
		}
	}

	if tolerance > 0 && signatureOK {
		skew %= int64(10 * tolerance / time.Second)
		at := now.Add(time.Duration(skew) * time.Second)
		_, serr := src.Verifier.Verify(h.Clone(), body, at)
		outside := skew > int64(tolerance/time.Second) || -skew > int64(tolerance/time.Second)
		if outside && inbox.CauseOf(serr) != inbox.CauseTimestampOutOfTolerance {
			t.Fatalf("checked %ds from the signing time: %v, want timestamp_out_of_tolerance", skew, serr)
		}
		if !outside && inbox.CauseOf(serr) != inbox.CauseOf(err) && !(serr == nil && err == nil) {
			t.Fatalf("checked %ds from the signing time: %v, at signing time: %v", skew, serr, err)
		}
	}
}

func fuzzSource(f *testing.F, doc, name string) *Source {
	f.Helper()
	set, err := Parse([]byte(doc))
	if err != nil {
		f.Fatal(err)
	}
	src, _ := set.Lookup(name)
	return src
}

func FuzzStripeVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"s":{"kind":"stripe","secrets":["whsec_fuzz_new","whsec_fuzz_old"]}}}`, "s")
	body := `{"id":"evt_1","type":"invoice.paid"}`
	f.Add([]byte(body), stripeHeader("whsec_fuzz_old", now.Unix(), body), int64(0), uint(0))
	f.Add([]byte(body), "t=1700000000,v1=zz,v0=00", int64(301), uint(3))
	f.Add([]byte(`{"id":12}`), "t=,v1=", int64(-301), uint(1))
	f.Add([]byte(""), "t=1,t=2", int64(0), uint(0))
	f.Fuzz(func(t *testing.T, body []byte, header string, skew int64, flip uint) {
		id, err := src.Verifier.Verify(http.Header{"Stripe-Signature": {header}}, body, now)
		checkOutcome(t, "arbitrary header", id, err)
		fuzzRoundTrip(t, src, body, "", "", flip, skew, DefaultTolerance)
	})
}

func FuzzStandardVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"s":{"kind":"standard","secrets":["`+specSecret+`","whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2"]}}}`, "s")
	f.Add([]byte(specBody), specID, specTimestamp, specSignature, int64(0), uint(0))
	f.Add([]byte(`{"type":"a"}`), "msg_1", "1700000000", "v1,AAAA v1a,xyz v2,", int64(-400), uint(9))
	f.Add([]byte(`{"type":1}`), "", "-5", "v1", int64(300), uint(2))
	f.Fuzz(func(t *testing.T, body []byte, msgID, ts, sig string, skew int64, flip uint) {
		h := http.Header{"Webhook-Id": {msgID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		fuzzRoundTrip(t, src, body, msgID, "", flip, skew, DefaultTolerance)
	})
}

func FuzzGitHubVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"g":{"kind":"github","secrets":["It's a Secret to Everybody","gh-old"]}}}`, "g")
	f.Add([]byte(githubDocPayload), githubDocSignature, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "ping", uint(0))
	f.Add([]byte(`{}`), "sha256=", "", "", uint(1))
	f.Add([]byte(`{}`), "sha1=abc", "d\x00", "push\n", uint(5))
	f.Fuzz(func(t *testing.T, body []byte, sig, delivery, event string, flip uint) {
		h := http.Header{"X-Hub-Signature-256": {sig}, "X-Github-Delivery": {delivery}, "X-Github-Event": {event}, "X-Github-Hook-Id": {delivery}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		fuzzRoundTrip(t, src, body, delivery, event, flip, 0, 0)
	})
}

func FuzzSquareVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"q":{"kind":"square","secrets":["`+squareVectorKey+`","sq-old"],"notification_url":"`+squareVectorURL+`"}}}`, "q")
	f.Add([]byte(squareVectorBody), squareVectorSignature, uint(0))
	f.Add([]byte(`{"event_id":"","type":"x"}`), "====", uint(4))
	f.Add([]byte(`{"event_id":"a\u0000"}`), "AAAA", uint(2))
	f.Fuzz(func(t *testing.T, body []byte, sig string, flip uint) {
		id, err := src.Verifier.Verify(http.Header{"X-Square-Hmacsha256-Signature": {sig}}, body, now)
		checkOutcome(t, "arbitrary header", id, err)
		fuzzRoundTrip(t, src, body, "", "", flip, 0, 0)
	})
}

func FuzzShopifyVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"s":{"kind":"shopify","secrets":["shopify-test-secret","shopify-old"]}}}`, "s")
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

// hmacFuzzDocs are the fixed configurations FuzzHMACVerify picks from; the
// fuzzer also tries its own signed_content template on a hex source.
var hmacFuzzDocs = []string{
	hmacDoc,
	`{"sources":{"h":{"kind":"hmac","secrets":["base64:` + specSecret[len("whsec_"):] + `"],"signature_header":"webhook-signature","signature_prefix":"v1,","encoding":"base64",
	  "timestamp_header":"webhook-timestamp","signed_content":"{id}.{timestamp}.{body}","event_id":{"header":"webhook-id"}}}}`,
	`{"sources":{"h":{"kind":"hmac","secrets":["k1","k2"],"signature_header":"X-Sig","signature_prefix":"sha256=",
	  "event_id":{"header":"X-Event-Id"},"event_type":{"header":"X-Event-Type"}}}}`,
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
		doc := `{"sources":{"t":{"kind":"hmac","secrets":["k"],"signature_header":"X-Sig","timestamp_header":"X-Ts",
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

func FuzzBodyFields(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1","type":"invoice.paid"}`), "id")
	f.Add([]byte(`{"data":{"object":{"id":"in_1"}}}`), "data.object.id")
	f.Add([]byte("{\"id\":\"a\xffb\"}"), "id")
	f.Add([]byte(`{"id":"\ud800"}`), "id")
	f.Add([]byte(`{"id":null,"id":"b"}`), "id")
	f.Add([]byte(` [1]`), "a..b")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		fields, ferr := bodyFields(body, "id", "type")
		if ferr != nil && inbox.CauseOf(ferr) != inbox.CauseUnparsableBody {
			t.Fatalf("bodyFields: %v", ferr)
		}
		for k, v := range fields {
			if !utf8.ValidString(v) {
				t.Fatalf("bodyFields %s = %q: not UTF-8", k, v)
			}
		}
		if ferr == nil && !json.Valid(body) {
			t.Fatalf("bodyFields accepted invalid JSON %q", body)
		}
		keys, err := parseJSONPath(path)
		if err != nil {
			return
		}
		got, perr := pathString(body, keys)
		if perr != nil && inbox.CauseOf(perr) != inbox.CauseUnparsableBody {
			t.Fatalf("pathString: %v", perr)
		}
		if perr == nil && (!utf8.ValidString(got) || !json.Valid(body)) {
			t.Fatalf("pathString = %q from %q", got, body)
		}
		if len(keys) == 1 {
			one, oerr := bodyFields(body, keys[0])
			if (oerr == nil) != (perr == nil) || (oerr == nil && one[keys[0]] != got) {
				t.Fatalf("bodyFields %q (%v) and pathString %q (%v) disagree on %q", one[keys[0]], oerr, got, perr, body)
			}
		}
		// Whatever was extracted, checkIdentity either refuses it or
		// passes a storable id.
		ident, cerr := checkIdentity(inbox.Identity{EventID: got, EventType: fields["type"]})
		checkOutcome(t, "extracted", ident, cerr)
	})
}
