package source

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Slack's documented example ("Verifying requests from Slack"): a slash
// command's form body, the signing secret and timestamp below give this
// signature.
const (
	slackDocSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	slackDocTimestamp = "1531420618"
	slackDocBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackDocSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

const slackDoc = `{"sources":{"sl":{"kind":"slack","secrets":["` + slackDocSecret + `","slack-old-secret-0123456789"]}}}`

func TestSlackDocumentedExample(t *testing.T) {
	t.Parallel()
	src := lookup(t, slackDoc, "sl")
	at := time.Unix(1531420618+30, 0)
	h := headers("X-Slack-Signature", slackDocSignature, "X-Slack-Request-Timestamp", slackDocTimestamp)
	// The signature matches; the body is a slash command's form, not an
	// Events API event: refused after the signature, as unparsable.
	_, err := src.Verifier.Verify(h, []byte(slackDocBody), at)
	if inbox.CauseOf(err) != inbox.CauseUnparsableBody {
		t.Fatalf("the documented example: %v, want unparsable_body (past the signature)", err)
	}
	// Our signer gives Slack's signature.
	sh, err := src.SignEvent([]byte(slackDocBody), "", "", time.Unix(1531420618, 0))
	if err != nil {
		t.Fatal(err)
	}
	if sh.Get("X-Slack-Signature") != slackDocSignature || sh.Get("X-Slack-Request-Timestamp") != slackDocTimestamp {
		t.Fatalf("signed %v, want %s", sh, slackDocSignature)
	}
	// Six minutes later, the same request is out of tolerance.
	if _, err := src.Verifier.Verify(h, []byte(slackDocBody), at.Add(6*time.Minute)); inbox.CauseOf(err) != inbox.CauseTimestampOutOfTolerance {
		t.Fatalf("six minutes later: %v", err)
	}
}

// slackEvent is an Events API event_callback as Slack documents it.
const slackEvent = `{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123ABC456","text":"hi","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"},"type":"event_callback","event_id":"Ev123ABC456","event_time":1515449522000016}`

func TestSlackVerify(t *testing.T) {
	t.Parallel()
	src := lookup(t, slackDoc, "sl")
	sign := func(body string, at time.Time) http.Header {
		h, err := src.SignEvent([]byte(body), "", "", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	good := sign(slackEvent, now)
	tests := []struct {
		name   string
		header http.Header
		body   string
		cause  inbox.Cause
		id     string
		typ    string
	}{
		{"event_callback", good, slackEvent, "", "Ev123ABC456", "app_mention"},
		{"top-level type", sign(`{"type":"app_rate_limited","event_id":"Ev1"}`, now), `{"type":"app_rate_limited","event_id":"Ev1"}`, "", "Ev1", "app_rate_limited"},
		{"no event_id", sign(`{"type":"event_callback","event":{"type":"x"}}`, now), `{"type":"event_callback","event":{"type":"x"}}`, inbox.CauseMissingEventID, "", ""},
		{"event type not a string", sign(`{"type":"event_callback","event_id":"Ev2","event":{"type":7}}`, now), `{"type":"event_callback","event_id":"Ev2","event":{"type":7}}`, inbox.CauseInvalidEventType, "", ""},
		{"no signature", headers("X-Slack-Request-Timestamp", "1700000000"), slackEvent, inbox.CauseSignatureMissing, "", ""},
		{"no v0= prefix", headers("X-Slack-Signature", strings.TrimPrefix(good.Get("X-Slack-Signature"), "v0="), "X-Slack-Request-Timestamp", "1700000000"), slackEvent, inbox.CauseSignatureMalformed, "", ""},
		{"signature repeated", headers("X-Slack-Signature", good.Get("X-Slack-Signature"), "X-Slack-Signature", good.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", "1700000000"), slackEvent, inbox.CauseSignatureMalformed, "", ""},
		{"no timestamp", headers("X-Slack-Signature", good.Get("X-Slack-Signature")), slackEvent, inbox.CauseSignatureMalformed, "", ""},
		{"timestamp with a leading zero", headers("X-Slack-Signature", good.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", "01700000000"), slackEvent, inbox.CauseSignatureMalformed, "", ""},
		{"timestamp repeated", headers("X-Slack-Signature", good.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", "1700000000", "X-Slack-Request-Timestamp", "1700000000"), slackEvent, inbox.CauseSignatureMalformed, "", ""},
		{"another timestamp", headers("X-Slack-Signature", good.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", "1700000001"), slackEvent, inbox.CauseSignatureMismatch, "", ""},
		{"tampered body", good, strings.Replace(slackEvent, "hi", "ho", 1), inbox.CauseSignatureMismatch, "", ""},
		{"too old", sign(slackEvent, now.Add(-6*time.Minute)), slackEvent, inbox.CauseTimestampOutOfTolerance, "", ""},
		{"from the future", sign(slackEvent, now.Add(6*time.Minute)), slackEvent, inbox.CauseTimestampOutOfTolerance, "", ""},
		{"within the tolerance", sign(slackEvent, now.Add(-4*time.Minute)), slackEvent, "", "Ev123ABC456", "app_mention"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.header, []byte(tt.body), now)
			if inbox.CauseOf(err) != tt.cause && !(err == nil && tt.cause == "") {
				t.Fatalf("got %v, want %q", err, tt.cause)
			}
			if err == nil && (id.EventID != tt.id || id.EventType != tt.typ) {
				t.Fatalf("identity %+v, want %s %s", id, tt.id, tt.typ)
			}
		})
	}
	// A retry's headers become metadata.
	h := sign(slackEvent, now)
	h.Set("X-Slack-Retry-Num", "1")
	h.Set("X-Slack-Retry-Reason", "http_timeout")
	id, err := src.Verifier.Verify(h, []byte(slackEvent), now)
	if err != nil || id.Metadata["slack_retry_num"] != "1" || id.Metadata["slack_retry_reason"] != "http_timeout" {
		t.Fatalf("retry: %+v %v", id, err)
	}
}

// slackChallenge is Slack's documented url_verification request.
const slackChallenge = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`

func TestSlackHandshake(t *testing.T) {
	t.Parallel()
	src := lookup(t, slackDoc, "sl")
	if !src.Handshakes() {
		t.Fatal("slack does not handshake")
	}
	req := func(method, body string, at time.Time) HandshakeRequest {
		h, err := src.SignEvent([]byte(body), "", "", at)
		if err != nil {
			t.Fatal(err)
		}
		return HandshakeRequest{Method: method, Query: url.Values{}, Header: h, Body: []byte(body), Now: now}
	}
	ans, ok, err := src.Handshake(req("POST", slackChallenge, now))
	if err != nil || !ok {
		t.Fatalf("signed challenge: %v %v", ok, err)
	}
	var got map[string]string
	if err := json.Unmarshal(ans.Body, &got); err != nil {
		t.Fatalf("answer %q: %v", ans.Body, err)
	}
	if !field.Check(t, "answer",
		field.Eq("challenge", got["challenge"], "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"),
		field.Is("Body", string(ans.Body), len(got) == 1, "the challenge alone"),
		field.Eq("ContentType", ans.ContentType, "application/json"),
	) {
		t.FailNow()
	}
	// Signed by someone else, stale, or with a hostile challenge: refused.
	forged := req("POST", slackChallenge, now)
	forged.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("ab", 32))
	if _, _, err := src.Handshake(forged); inbox.CauseOf(err) != inbox.CauseSignatureMismatch {
		t.Fatalf("forged challenge: %v", err)
	}
	if _, _, err := src.Handshake(req("POST", slackChallenge, now.Add(-10*time.Minute))); inbox.CauseOf(err) != inbox.CauseTimestampOutOfTolerance {
		t.Fatalf("stale challenge: %v", err)
	}
	hostile := `{"type":"url_verification","challenge":"<script>alert(1)</script>"}`
	if _, _, err := src.Handshake(req("POST", hostile, now)); inbox.CauseOf(err) != inbox.CauseUnparsableBody {
		t.Fatalf("hostile challenge: %v", err)
	}
	// Not a handshake: an event, an event that mentions the word, a GET.
	for _, r := range []HandshakeRequest{req("POST", slackEvent, now), req("POST", strings.Replace(slackEvent, `"hi"`, `"url_verification"`, 1), now), req("GET", slackChallenge, now)} {
		if _, ok, err := src.Handshake(r); ok || err != nil {
			t.Fatalf("not a handshake answered: %v %v (%s %s)", ok, err, r.Method, r.Body)
		}
	}
}

func FuzzSlackVerify(f *testing.F) {
	src := fuzzSource(f, slackDoc, "sl")
	f.Add([]byte(slackEvent), slackDocSignature, slackDocTimestamp, uint(0), int64(0))
	f.Add([]byte(slackChallenge), "v0=", "1700000000", uint(3), int64(400))
	f.Add([]byte(`{"type":"event_callback","event_id":"Ev\u001b","event":{"type":7}}`), "v0=zz", "+1700000000", uint(9), int64(-301))
	f.Fuzz(func(t *testing.T, body []byte, sig, ts string, flip uint, skew int64) {
		h := http.Header{"X-Slack-Signature": {sig}, "X-Slack-Request-Timestamp": {ts}, "X-Slack-Retry-Num": {ts}}
		id, err := src.Verifier.Verify(h, body, now)
		checkOutcome(t, "arbitrary headers", id, err)
		checkHandshake(t, src, HandshakeRequest{Method: "POST", Header: h, Body: body, Now: now})
		fuzzRoundTrip(t, src, body, "", "", flip, skew, DefaultTolerance)
		signed, _ := src.SignEvent(body, "", "", now)
		checkHandshake(t, src, HandshakeRequest{Method: "POST", Header: signed, Body: body, Now: now})
	})
}
