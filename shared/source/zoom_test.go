package source

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

const zoomDoc = `{"sources":{"zm":{"kind":"zoom","secrets":["zoom-secret-token-0123","zoom-old-secret-token-45"]}}}`

// zoomValidation is Zoom's documented endpoint.url_validation request
// ("Validate your webhook endpoint").
const zoomValidation = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`

// zoomEvent is a meeting.started event as Zoom documents it.
const zoomEvent = `{"event":"meeting.started","event_ts":1626230691572,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"My Personal Meeting Room","type":4,"start_time":"2021-07-13T21:44:51Z","timezone":"America/Los_Angeles"}}}`

// TestZoomEncryptedTokenVector: the plain token of Zoom's documented
// example under the secret "secretValueTest" gives the encryptedToken
// Elastic's Filebeat (http_endpoint's Zoom CRC, an independent
// implementation) expects; Zoom's page does not publish its secret.
func TestZoomEncryptedTokenVector(t *testing.T) {
	t.Parallel()
	if got := zoomEncryptedToken([]byte("secretValueTest"), "qgg8vlvZRS6UYooatFL8Aw"); got != "70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff" {
		t.Fatalf("encryptedToken = %s", got)
	}
}

func TestZoomVerify(t *testing.T) {
	t.Parallel()
	src := lookup(t, zoomDoc, "zm")
	sign := func(body string, at time.Time) http.Header {
		h, err := src.SignEvent([]byte(body), "", "", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	good := sign(zoomEvent, now)
	if good.Get("x-zm-signature") == "" || good.Get("x-zm-request-timestamp") != "1700000000" {
		t.Fatalf("signed headers %v", good)
	}
	tests := []struct {
		name   string
		header http.Header
		body   string
		cause  inbox.Cause
	}{
		{"signed", good, zoomEvent, ""},
		{"no signature", headers("x-zm-request-timestamp", "1700000000"), zoomEvent, inbox.CauseSignatureMissing},
		{"no v0=", headers("x-zm-signature", "v1="+strings.TrimPrefix(good.Get("x-zm-signature"), "v0="), "x-zm-request-timestamp", "1700000000"), zoomEvent, inbox.CauseSignatureMalformed},
		{"no timestamp", headers("x-zm-signature", good.Get("x-zm-signature")), zoomEvent, inbox.CauseSignatureMalformed},
		{"milliseconds", headers("x-zm-signature", good.Get("x-zm-signature"), "x-zm-request-timestamp", "1700000000000"), zoomEvent, inbox.CauseSignatureMismatch},
		{"tampered", good, strings.Replace(zoomEvent, "My Personal", "Your Personal", 1), inbox.CauseSignatureMismatch},
		{"too old", sign(zoomEvent, now.Add(-6*time.Minute)), zoomEvent, inbox.CauseTimestampOutOfTolerance},
		{"no event", sign(`{"payload":{}}`, now), `{"payload":{}}`, inbox.CauseInvalidEventType},
		{"not JSON", sign(`event=x`, now), `event=x`, inbox.CauseUnparsableBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.header, []byte(tt.body), now)
			if inbox.CauseOf(err) != tt.cause && !(err == nil && tt.cause == "") {
				t.Fatalf("got %v, want %q", err, tt.cause)
			}
			if err == nil && (id.EventID != bodyEventID([]byte(tt.body)) || id.EventType != "meeting.started") {
				t.Fatalf("identity %+v", id)
			}
		})
	}
	// A retry (the same body, signed again later) has the same id; another
	// body another.
	a, _ := src.Verifier.Verify(sign(zoomEvent, now.Add(-time.Minute)), []byte(zoomEvent), now)
	b, _ := src.Verifier.Verify(good, []byte(zoomEvent), now)
	other := strings.Replace(zoomEvent, "1626230691572", "1626230691573", 1)
	c, _ := src.Verifier.Verify(sign(other, now), []byte(other), now)
	if a.EventID != b.EventID || a.EventID == c.EventID || !strings.HasPrefix(a.EventID, "sha256:") {
		t.Fatalf("ids %q %q %q", a.EventID, b.EventID, c.EventID)
	}
}

func TestZoomHandshake(t *testing.T) {
	t.Parallel()
	src := lookup(t, zoomDoc, "zm")
	req := func(body string, key string, at time.Time) HandshakeRequest {
		return HandshakeRequest{Method: "POST", Query: url.Values{}, Header: zoomScheme.sign([]byte(key), []byte(body), at), Body: []byte(body), Now: now}
	}
	for _, key := range []string{"zoom-secret-token-0123", "zoom-old-secret-token-45"} {
		ans, ok, err := src.Handshake(req(zoomValidation, key, now))
		if err != nil || !ok {
			t.Fatalf("signed validation (%s): %v %v", key, ok, err)
		}
		var got map[string]string
		if json.Unmarshal(ans.Body, &got) != nil || len(got) != 2 || got["plainToken"] != "qgg8vlvZRS6UYooatFL8Aw" ||
			got["encryptedToken"] != zoomEncryptedToken([]byte(key), "qgg8vlvZRS6UYooatFL8Aw") {
			t.Fatalf("answer %q: the plain token and its HMAC under the secret that signed it", ans.Body)
		}
	}
	if _, _, err := src.Handshake(req(zoomValidation, "someone-elses-secret-token", now)); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("forged validation: %v", err)
	}
	unsigned := req(zoomValidation, "zoom-secret-token-0123", now)
	unsigned.Header = http.Header{}
	if _, _, err := src.Handshake(unsigned); inbox.CauseOf(err) != inbox.CauseSignatureMissing {
		t.Fatalf("unsigned validation: %v", err)
	}
	if _, _, err := src.Handshake(req(zoomValidation, "zoom-secret-token-0123", now.Add(-time.Hour))); inbox.CauseOf(err) != inbox.CauseTimestampOutOfTolerance {
		t.Fatalf("stale validation: %v", err)
	}
	for _, bad := range []string{
		`{"event":"endpoint.url_validation","payload":{"plainToken":"a\"b<c>"}}`,
		`{"event":"endpoint.url_validation","payload":{"plainToken":12}}`,
		`{"event":"endpoint.url_validation","payload":{}}`,
		`{"event":"endpoint.url_validation","payload":{"plainToken":"` + strings.Repeat("a", 300) + `"}}`,
	} {
		if _, _, err := src.Handshake(req(bad, "zoom-secret-token-0123", now)); inbox.CauseOf(err) != inbox.CauseUnparsableBody {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	if _, ok, err := src.Handshake(req(zoomEvent, "zoom-secret-token-0123", now)); ok || err != nil {
		t.Fatalf("an event answered as a handshake: %v %v", ok, err)
	}
}

func FuzzZoomVerify(f *testing.F) {
	src := fuzzSource(f, zoomDoc, "zm")
	f.Add([]byte(zoomEvent), "v0=", "1700000000", uint(0), int64(0))
	f.Add([]byte(zoomValidation), "v0=00", "1700000000", uint(7), int64(-400))
	f.Add([]byte(`{"event":"endpoint.url_validation","payload":{"plainToken":"<x>"}}`), "", "", uint(2), int64(301))
	f.Fuzz(func(t *testing.T, body []byte, sig, ts string, flip uint, skew int64) {
		h := http.Header{"X-Zm-Signature": {sig}, "X-Zm-Request-Timestamp": {ts}, "X-Zm-Trackingid": {ts}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		checkHandshake(t, src, HandshakeRequest{Method: "POST", Header: h, Body: body, Now: now})
		fuzzRoundTrip(t, src, body, "", "", flip, skew, DefaultTolerance)
		signed, _ := src.SignEvent(body, "", "", now)
		checkHandshake(t, src, HandshakeRequest{Method: "POST", Header: signed, Body: body, Now: now})
	})
}
