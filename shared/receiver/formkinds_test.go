package receiver_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/receiver"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// The twilio and hubspot sources of these tests.
const twilioHubSpotDoc = `{"sources": {
  "twilio":  {"kind": "twilio",  "secrets": ["test-twilio-auth-token-0123"], "url": "https://hooks.example.com/webhooks/twilio"},
  "hubspot": {"kind": "hubspot", "secrets": ["test-hubspot-client-secret-0"], "url": "https://hooks.example.com/webhooks/hubspot"}
}}`

func setupTwilioHubSpot(t *testing.T) *fixture {
	t.Helper()
	set, err := source.Parse([]byte(twilioHubSpotDoc))
	if err != nil {
		t.Fatal(err)
	}
	return setupOn(t, pgtest.Pool(t), receiver.Config{MaxBodyBytes: 64 << 10}, receiver.Deps{Sources: set})
}

// raw is a request for srcName with body and the given header, unsigned.
func raw(srcName string, body []byte, h http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/"+srcName, bytes.NewReader(body))
	for k, v := range h {
		r.Header[k] = v
	}
	return r
}

// A Twilio form delivery is stored byte for byte, once: its redelivery, a
// re-encoding and a copy with bytes moved between a name and its value
// (all under the one signature) are duplicates, never new events; a JSON
// delivery is refused as unauthenticated; hostile forms, signed, never
// panic nor answer 5xx.
func TestTwilioDelivery(t *testing.T) {
	t.Parallel()
	f := setupTwilioHubSpot(t)
	body := []byte("AccountSid=AC0&MessageSid=SM1&MessageStatus=delivered&To=%2B15005550001")
	req := f.signed("twilio", body, "")
	sig := req.Header.Clone()
	a := f.do(req)
	if a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("first delivery: %+v", a)
	}
	ev, err := f.store.EventGetByID(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "stored", field.Printed("Body", string(ev.Body), string(body)), field.Printed("Payload stored", ev.Payload != nil, false),
		field.Printed("Type", ev.Type, "message.delivered"), field.Printed("len(EventID)", len(ev.EventID), 32), field.Printed("Metadata[twilio_sid]", ev.Metadata["twilio_sid"], "SM1"))
	for _, again := range []string{
		string(body),
		"To=%2b15005550001&MessageStatus=delivered&MessageSid=SM1&AccountSid=AC0",
		"AccountSid=AC0&MessageSid=SM1&MessageStatusd=elivered&To=%2B15005550001",
	} {
		d := f.do(raw("twilio", []byte(again), sig))
		if d.Code != 200 || d.Status != "duplicate" {
			t.Fatalf("%s: %+v, want a duplicate", again, d)
		}
	}
	json := raw("twilio", []byte(`{"MessageSid":"SM1"}`), sig)
	json.Header.Set("Content-Type", "application/json")
	if d := f.do(json); d.Code != 401 || d.Cause != inbox.CauseUnauthenticated {
		t.Fatalf("JSON delivery: %+v", d)
	}

	hostile := []struct {
		name   string
		body   string
		status int
		cause  inbox.Cause
	}{
		{"SQL in a value", "MessageSid=SM2&Body=%27%29%3B+DROP+TABLE+webhook_events%3B+--", 200, ""},
		{"NUL in a value", "MessageSid=SM3&Body=a%00b", 200, ""},
		{"NUL in the status (the type)", "MessageSid=SM4&MessageStatus=%00", 400, inbox.CauseInvalidEventType},
		{"ESC in the status", "MessageSid=SM5&MessageStatus=%1B%5B2J", 400, inbox.CauseInvalidEventType},
		{"invalid UTF-8 in a value", "MessageSid=SM6&Body=caf%E9", 200, ""},
		{"invalid UTF-8 in the SID (metadata left out)", "MessageSid=SM%FF&MessageStatus=sent", 200, ""},
		{"10 000 parameters", strings.Repeat("a=1&", 9999) + "a=1", 200, ""},
		{"a value of 60 KiB", "Body=" + strings.Repeat("x", 60<<10), 200, ""},
		{"invalid escape", "Body=%zz", 401, inbox.CauseUnauthenticated},
		{"raw newline", "Body=a\nb", 401, inbox.CauseUnauthenticated},
		{"no parameters", "", 400, inbox.CauseMissingEventID},
	}
	for _, tt := range hostile {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := f.do(f.signed("twilio", []byte(tt.body), ""))
			if a.Code >= 500 || a.Code != tt.status || a.Cause != tt.cause {
				t.Fatalf("got %d %+v, want %d %q", a.Code, a, tt.status, tt.cause)
			}
			if tt.status != 200 {
				return
			}
			ev, err := f.store.EventGetByID(context.Background(), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ev.Body, []byte(tt.body)) {
				t.Fatal("stored body differs from the one sent")
			}
		})
	}
}

// A HubSpot batch is one event, typed by its common subscriptionType; the
// retry (attemptNumber grown, signed anew later) is a duplicate; a
// signature older than five minutes, or from the future, is refused.
func TestHubSpotDelivery(t *testing.T) {
	t.Parallel()
	f := setupTwilioHubSpot(t)
	src, _ := f.sources.Lookup("hubspot")
	batch := func(attempt int) []byte {
		n := strconv.Itoa(attempt)
		return []byte(`[{"eventId":11,"subscriptionId":5,"portalId":62515,"occurredAt":1700000000000,"subscriptionType":"deal.creation","attemptNumber":` + n + `,"objectId":1},` +
			`{"eventId":12,"subscriptionId":5,"portalId":62515,"occurredAt":1700000000001,"subscriptionType":"deal.creation","attemptNumber":` + n + `,"objectId":2}]`)
	}
	signedAt := func(body []byte, at time.Time) *http.Request {
		h, err := src.Sign(body, "", at)
		if err != nil {
			t.Fatal(err)
		}
		return raw("hubspot", body, h)
	}
	a := f.do(signedAt(batch(0), now))
	if a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("first delivery: %+v", a)
	}
	ev, err := f.store.EventGetByID(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	field.Must(t, "stored", field.Printed("Type", ev.Type, "deal.creation"), field.Printed("EventID starts 11-2-", strings.HasPrefix(ev.EventID, "11-2-"), true),
		field.Printed("Body", string(ev.Body), string(batch(0))), field.Printed("Payload stored", ev.Payload != nil, true))
	if d := f.do(signedAt(batch(1), now.Add(-time.Minute))); d.Code != 200 || d.Status != "duplicate" {
		t.Fatalf("retry: %+v", d)
	}
	for _, at := range []time.Time{now.Add(-5*time.Minute - time.Second), now.Add(5*time.Minute + time.Second)} {
		if d := f.do(signedAt(batch(2), at)); d.Code != 401 || d.Cause != inbox.CauseUnauthenticated {
			t.Fatalf("signed at %v: %+v", at.Sub(now), d)
		}
	}
	if n := f.count(); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
}
