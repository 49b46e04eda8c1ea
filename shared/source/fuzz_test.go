package source

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Fuzz targets: one per verifier, in its kind's test file
// (FuzzStripeVerify in stripe_test.go, ...), and FuzzBodyFields below for
// the id/type extraction; this file holds what they share. Each checks that
// nothing panics and these invariants:
//   - every refusal carries a verifier cause (never "internal");
//   - an accepted delivery has a 1..255-byte printable UTF-8 id, a bounded
//     printable type, and storable metadata;
//   - what our signer signed never fails as signature_mismatch, nor as
//     out of tolerance at the signing time;
//   - a signed body with one byte changed never verifies;
//   - a signed delivery checked at a clock beyond the tolerance never
//     verifies.
// `make test` runs each briefly (scripts/fuzz-smoke.sh finds them); plain
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

// FuzzParseSources drives the sources document's parsing with the options
// issue 14 added (endpoint token, untokened path, secret minimums,
// tolerance bound) in any combination: it never panics; an error never
// quotes the secret or the token; a secret shorter than MinSecretBytes or
// a tolerance above MaxTolerance is never accepted; and an accepted source
// is reachable exactly where its options say.
func FuzzParseSources(f *testing.F) {
	for _, kind := range []string{"github", "shopify", "stripe", "standard", "hmac", "square", "twilio", "hubspot", ""} {
		f.Add(kind, "s3cr3t-0123456789abcdef", "tok_0123456789abcdefghijklmnopqrstuv", true, false, 300, "")
		f.Add(kind, "short", "", false, true, 0, `"x":1`)
	}
	f.Add("stripe", "whsec_0123456789abcdefghijklmnop", "tok_0123456789abcdefghijklmnopqrstuv", false, false, 3601, "")
	f.Add("hmac", "base64:AAAAAAAAAAAAAAAAAAAAAAAA", "\x1b]52;c;aGk=\x07", true, true, -1, `"event_id_header":"X-Id"`)
	f.Fuzz(func(t *testing.T, kind, secret, token string, withToken, untokened bool, tolerance int, extra string) {
		opts := map[string]any{"kind": kind, "secrets": []string{secret}}
		if withToken {
			opts["endpoint_token"] = token
		}
		if !untokened {
			opts["untokened_path"] = false
		}
		if tolerance != 0 {
			opts["tolerance_seconds"] = tolerance
		}
		if kind == "square" {
			opts["notification_url"] = "https://example.com/webhooks/q"
		}
		if kind == "twilio" || kind == "hubspot" {
			opts["url"] = "https://example.com/webhooks/q"
		}
		raw, err := json.Marshal(opts)
		if err != nil {
			return
		}
		if extra != "" {
			raw = append(append(raw[:len(raw)-1], ','), append([]byte(extra), '}')...)
		}
		doc := append(append([]byte(`{"sources":{"s":`), raw...), '}', '}')
		set, err := Parse(doc)
		if err != nil {
			for _, s := range []string{secret, token} {
				if len(s) >= 12 && strings.Contains(err.Error(), s) {
					t.Fatalf("the error quotes a secret or token: %v", err)
				}
			}
			return
		}
		src, ok := set.Lookup("s")
		if !ok {
			t.Fatal("accepted without the source")
		}
		if len(secret) < MinSecretBytes {
			t.Fatalf("a %d-byte secret was accepted for kind %q", len(secret), kind)
		}
		if tolerance > int(MaxTolerance/time.Second) {
			t.Fatalf("tolerance %d s accepted", tolerance)
		}
		if src.AllowsEndpoint("", false) != untokened {
			t.Fatalf("untokened path open = %v, want %v", src.AllowsEndpoint("", false), untokened)
		}
		if withToken && (!src.AllowsEndpoint(token, true) || src.AllowsEndpoint(token+"x", true)) {
			t.Fatal("the tokened path does not take exactly its token")
		}
		if !withToken && src.AllowsEndpoint(token, true) {
			t.Fatal("a source without a token is reachable at a tokened path")
		}
	})
}

// handshakeCauses are the causes a handshake may refuse with.
var handshakeCauses = map[inbox.Cause]bool{
	inbox.CauseSignatureMissing: true, inbox.CauseSignatureMalformed: true, inbox.CauseSignatureMismatch: true,
	inbox.CauseTimestampOutOfTolerance: true, inbox.CauseUnparsableBody: true, inbox.CauseInvalidRequest: true,
}

// checkHandshake enforces the handshake invariants on one request: it
// never panics, a refusal carries a handshake cause, and an answer is
// small and repeats nothing but checked tokens (no markup, no control
// characters).
func checkHandshake(t *testing.T, src *Source, r HandshakeRequest) {
	t.Helper()
	ans, ok, err := src.Handshake(r)
	if err != nil {
		if ok || !handshakeCauses[inbox.CauseOf(err)] {
			t.Fatalf("handshake refused with %v (ok %v)", err, ok)
		}
		return
	}
	if !ok {
		return
	}
	if len(ans.Body) > 2*maxHandshakeToken+128 || ans.ContentType == "" {
		t.Fatalf("handshake answer %q %q", ans.ContentType, ans.Body)
	}
	if strings.ContainsAny(string(ans.Body), "<>'\\\x00\r\n") || !utf8.Valid(ans.Body) {
		t.Fatalf("handshake answer carries unchecked text: %q", ans.Body)
	}
}
