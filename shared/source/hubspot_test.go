package source

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// HubSpot's documented request body (its "Validating requests" page and
// the @hubspot/api-client SDK's own test), its example client secret, and
// v3 signatures made by the SDK's Signature.getSignature("POST", "v3",
// ...) of @hubspot/api-client 14.0.1 (npm), at the tests' clock
// (1700000000000 ms), for the URL without and with a query string.
const (
	hubspotDocSecret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	hubspotDocBody   = `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`
	hubspotDocURL    = "https://www.example.com/webhook_uri"
	hubspotSDKSig    = "/pXDSgWeGksQpwCsgqd43P0eY6gBIse9UX0tfkudUrE="
	hubspotSDKQuery  = "?tenant=a&b=c"
	hubspotSDKSigQ   = "byYUYevdyz5G1RzZtIXZZ6RZoTVIDY1FIMLq+bYKuQQ="
	hubspotSDKTime   = "1700000000000"
)

func hubspotDoc(u string) string {
	return `{"sources":{"hs":{"kind":"hubspot","secrets":["` + hubspotDocSecret + `","old-client-secret-0123"],"url":"` + u + `"}}}`
}

func TestHubSpotSDKVectors(t *testing.T) {
	t.Parallel()
	for u, sig := range map[string]string{hubspotDocURL: hubspotSDKSig, hubspotDocURL + hubspotSDKQuery: hubspotSDKSigQ} {
		src := lookup(t, hubspotDoc(u), "hs")
		h := headers("X-HubSpot-Signature-v3", sig, "X-HubSpot-Request-Timestamp", hubspotSDKTime)
		id, err := src.Verifier.Verify(h, []byte(hubspotDocBody), now)
		if err != nil {
			t.Fatalf("%s: the SDK's signature does not verify: %v", u, err)
		}
		if !strings.HasPrefix(id.EventID, "1-1-") || id.EventType != "contact.creation" {
			t.Fatalf("identity = %+v", id)
		}
		got, err := src.Sign([]byte(hubspotDocBody), "", now)
		if err != nil || got.Get("X-HubSpot-Signature-v3") != sig || got.Get("X-HubSpot-Request-Timestamp") != hubspotSDKTime {
			t.Fatalf("Sign = %v, %v; want the SDK's %q", got, err, sig)
		}
	}
	// The other URL's signature does not verify.
	src := lookup(t, hubspotDoc(hubspotDocURL), "hs")
	h := headers("X-HubSpot-Signature-v3", hubspotSDKSigQ, "X-HubSpot-Request-Timestamp", hubspotSDKTime)
	if _, err := src.Verifier.Verify(h, []byte(hubspotDocBody), now); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("another URL's signature: %v", err)
	}
}

// HubSpot decodes the escapes of its table in the URI before signing: a
// configured URL with %3A or %2C is signed with ':' or ','.
func TestHubSpotURIDecoding(t *testing.T) {
	t.Parallel()
	if got := hubspotURI("https://example.com/h%3Aa?x=%2C%2c&y=%20%3F"); got != "https://example.com/h:a?x=,,&y=%20?" {
		t.Fatalf("hubspotURI = %q", got)
	}
	encoded := lookup(t, hubspotDoc("https://example.com/hooks?list=a%2Cb"), "hs")
	decoded := lookup(t, hubspotDoc("https://example.com/hooks?list=a,b"), "hs")
	h, err := decoded.Sign([]byte(hubspotDocBody), "", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encoded.Verifier.Verify(h, []byte(hubspotDocBody), now); err != nil {
		t.Fatalf("signed over the decoded URI: %v", err)
	}
}

func TestHubSpotVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{
	 "hs":{"kind":"hubspot","secrets":["new-client-secret-0123","old-client-secret-0123"],"url":"https://example.com/webhooks/hubspot"},
	 "oldonly":{"kind":"hubspot","secrets":["old-client-secret-0123"],"url":"https://example.com/webhooks/hubspot"},
	 "other":{"kind":"hubspot","secrets":["other-client-secret-01"],"url":"https://example.com/webhooks/hubspot"},
	 "otherurl":{"kind":"hubspot","secrets":["new-client-secret-0123"],"url":"https://example.com/webhooks/hubspot2"}}}`)
	src, _ := set.Lookup("hs")
	body := []byte(hubspotDocBody)
	signAt := func(name string, b []byte, at time.Time) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.Sign(b, "", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	sig := func(b []byte) http.Header { return signAt("hs", b, now) }
	good := sig(body)
	sigValue, ts := good.Get("X-HubSpot-Signature-v3"), good.Get("X-HubSpot-Request-Timestamp")
	with := func(kv ...string) http.Header { return headers(kv...) }
	const sh, th = "X-HubSpot-Signature-v3", "X-HubSpot-Request-Timestamp"
	tests := []struct {
		name string
		h    http.Header
		body []byte
		at   time.Time
		want inbox.Cause
	}{
		{"valid", good, body, now, ""},
		{"rotated: old secret only", signAt("oldonly", body, now), body, now, ""},
		{"five minutes old", good, body, now.Add(5 * time.Minute), ""},
		{"five minutes ahead", good, body, now.Add(-5 * time.Minute), ""},
		{"older than five minutes", good, body, now.Add(5*time.Minute + time.Millisecond), inbox.CauseTimestampOutOfTolerance},
		{"from the future", good, body, now.Add(-5*time.Minute - time.Millisecond), inbox.CauseTimestampOutOfTolerance},
		{"tampered body", good, bytes.Replace(body, []byte(`"objectId":123`), []byte(`"objectId":124`), 1), now, inbox.CauseSignatureMismatch},
		{"timestamp changed", with(sh, sigValue, th, strconv.FormatInt(now.UnixMilli()+1, 10)), body, now, inbox.CauseSignatureMismatch},
		{"timestamp in seconds", with(sh, sigValue, th, strconv.FormatInt(now.Unix(), 10)), body, now, inbox.CauseSignatureMismatch},
		{"wrong secret", signAt("other", body, now), body, now, inbox.CauseSignatureMismatch},
		{"signed for another URL", signAt("otherurl", body, now), body, now, inbox.CauseSignatureMismatch},
		{"missing signature", with(th, ts), body, now, inbox.CauseSignatureMissing},
		{"v1 signature only", with("X-HubSpot-Signature", "232db2615f3d666fe21a8ec971ac7b5402d33b9a925784df3ca654d05f4817de", "X-HubSpot-Signature-Version", "v1"), body, now, inbox.CauseSignatureMissing},
		{"duplicated signature", with(sh, sigValue, sh, sigValue, th, ts), body, now, inbox.CauseSignatureMalformed},
		{"not base64", with(sh, "not base64!", th, ts), body, now, inbox.CauseSignatureMalformed},
		{"hex signature", with(sh, strings.Repeat("ab", 32), th, ts), body, now, inbox.CauseSignatureMalformed},
		{"missing timestamp", with(sh, sigValue), body, now, inbox.CauseSignatureMalformed},
		{"repeated timestamp", with(sh, sigValue, th, ts, th, ts), body, now, inbox.CauseSignatureMalformed},
		{"timestamp not a number", with(sh, sigValue, th, "yesterday"), body, now, inbox.CauseSignatureMalformed},
		{"timestamp with a sign", with(sh, sigValue, th, "+"+ts), body, now, inbox.CauseSignatureMalformed},
		{"negative timestamp", with(sh, sigValue, th, "-1"), body, now, inbox.CauseSignatureMalformed},
		{"timestamp of 17 digits", with(sh, sigValue, th, "17000000000000000"), body, now, inbox.CauseSignatureMalformed},
		{"signed object body", sig([]byte(`{"eventId":1}`)), []byte(`{"eventId":1}`), now, inbox.CauseUnparsableBody},
		{"signed invalid JSON", sig([]byte(`[{"eventId":1}`)), []byte(`[{"eventId":1}`), now, inbox.CauseUnparsableBody},
		{"signed array of numbers", sig([]byte(`[1,2]`)), []byte(`[1,2]`), now, inbox.CauseUnparsableBody},
		{"signed empty array", sig([]byte(`[]`)), []byte(`[]`), now, inbox.CauseMissingEventID},
		{"signed element without eventId", sig([]byte(`[{"eventId":1},{"objectId":2}]`)), []byte(`[{"eventId":1},{"objectId":2}]`), now, inbox.CauseMissingEventID},
		{"signed eventId of an object", sig([]byte(`[{"eventId":{}}]`)), []byte(`[{"eventId":{}}]`), now, inbox.CauseUnparsableBody},
		{"signed eventId invalid UTF-8", sig([]byte("[{\"eventId\":\"a\xffb\"}]")), []byte("[{\"eventId\":\"a\xffb\"}]"), now, inbox.CauseUnparsableBody},
		{"signed subscriptionType not a string", sig([]byte(`[{"eventId":1,"subscriptionType":true}]`)), []byte(`[{"eventId":1,"subscriptionType":true}]`), now, inbox.CauseUnparsableBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h, tt.body, tt.at)
			wantCause(t, err, tt.want)
			if tt.want == "" && (!strings.HasPrefix(id.EventID, "1-1-") || id.EventType != "contact.creation") {
				t.Fatalf("identity = %+v", id)
			}
		})
	}
}

// One request is one event: its id covers every element's portal,
// subscription, eventId and occurrence (not the order, not attemptNumber,
// which grows with each retry); its type is the common subscriptionType or
// "batch".
func TestHubSpotBatchIdentity(t *testing.T) {
	t.Parallel()
	ident := func(body string) inbox.Identity {
		t.Helper()
		id, err := hubspotIdentity([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return id
	}
	const (
		a  = `{"eventId":100,"subscriptionId":7,"portalId":62515,"occurredAt":1,"subscriptionType":"contact.creation","attemptNumber":0}`
		a1 = `{"eventId":100,"subscriptionId":7,"portalId":62515,"occurredAt":1,"subscriptionType":"contact.creation","attemptNumber":1}`
		b  = `{"eventId":101,"subscriptionId":7,"portalId":62515,"occurredAt":2,"subscriptionType":"contact.creation","attemptNumber":0}`
		c  = `{"eventId":"102","subscriptionId":8,"portalId":62515,"occurredAt":3,"subscriptionType":"deal.deletion"}`
		ap = `{"eventId":100,"subscriptionId":7,"portalId":99,"occurredAt":1,"subscriptionType":"contact.creation"}`
	)
	ab := ident("[" + a + "," + b + "]")
	if !strings.HasPrefix(ab.EventID, "100-2-") || ab.EventType != "contact.creation" {
		t.Fatalf("identity = %+v", ab)
	}
	if ba := ident("[" + b + "," + a + "]"); ba.EventID[len(ba.EventID)-32:] != ab.EventID[len(ab.EventID)-32:] {
		t.Errorf("reordered batch: %s, %s", ba.EventID, ab.EventID)
	}
	if retry := ident("[" + a1 + "," + b + "]"); retry.EventID != ab.EventID {
		t.Errorf("retried batch (attemptNumber 1): %s, want %s", retry.EventID, ab.EventID)
	}
	if mixed := ident("[" + a + "," + c + "]"); mixed.EventType != "batch" {
		t.Errorf("mixed types: %+v", mixed)
	}
	for _, other := range []string{"[" + a + "]", "[" + ap + "," + b + "]", "[" + a + "," + b + "," + c + "]"} {
		if id := ident(other); id.EventID == ab.EventID {
			t.Errorf("%s shares the id of another batch", other)
		}
	}
	if notype := ident(`[{"eventId":1}]`); notype.EventType != "batch" {
		t.Errorf("no subscriptionType: %+v", notype)
	}
}

func TestHubSpotOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ opts, want string }{
		{`"secrets":["new-client-secret-0123"]`, `field "url"`},
		{`"secrets":["new-client-secret-0123"],"url":"http://example.com/h"`, "must use https"},
		{`"secrets":["short"],"url":"https://example.com/h"`, `field "secrets"`},
		{`"secrets":["new-client-secret-0123"],"url":"https://example.com/h","tolerance_seconds":7200`, `field "tolerance_seconds"`},
	} {
		_, err := Parse([]byte(`{"sources":{"hs":{"kind":"hubspot",` + tc.opts + `}}}`))
		if err == nil || !strings.Contains(err.Error(), `source "hs"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.opts, err, tc.want)
		}
	}
}

func FuzzHubSpotVerify(f *testing.F) {
	src := fuzzSource(f, hubspotDoc(hubspotDocURL), "hs")
	f.Add([]byte(hubspotDocBody), hubspotSDKSig, hubspotSDKTime, uint(0), int64(0))
	f.Add([]byte(`[]`), "====", "-1", uint(1), int64(301))
	f.Add([]byte(`[{"eventId":"\u0000"},{"eventId":1e999}]`), "AAAA", "99999999999999999999", uint(9), int64(-3000))
	f.Fuzz(func(t *testing.T, body []byte, sig, ts string, flip uint, skew int64) {
		id, err := src.Verifier.Verify(http.Header{"X-Hubspot-Signature-V3": {sig}, "X-Hubspot-Request-Timestamp": {ts}}, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		fuzzRoundTrip(t, src, body, "", "", flip, skew, DefaultTolerance)
	})
}
