package source

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// The Standard Webhooks specification's own test vector.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = "1614265330"
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestStandardSpecVector(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"std":{"kind":"standard","secrets":["`+specSecret+`"],"type_field":""}}}`)
	src, _ := set.Lookup("std")
	for _, prefix := range []string{"Webhook", "Svix"} {
		h := http.Header{}
		h.Set(prefix+"-Id", specID)
		h.Set(prefix+"-Timestamp", specTimestamp)
		h.Set(prefix+"-Signature", specSignature)
		id, err := src.Verifier.Verify(h, []byte(specBody), time.Unix(1614265330, 0))
		if err != nil {
			t.Fatalf("%s headers: %v", prefix, err)
		}
		if id.EventID != specID {
			t.Fatalf("event id = %q", id.EventID)
		}
	}
	// Our signer must produce the spec's signature too.
	h, err := src.Sign([]byte(specBody), specID, time.Unix(1614265330, 0))
	if err != nil || h.Get("Webhook-Signature") != specSignature {
		t.Fatalf("Sign = %q, %v; want %q", h.Get("Webhook-Signature"), err, specSignature)
	}
}

func TestStandardVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"std":{"kind":"standard","secrets":["whsec_bmV3LXNlY3JldC1rZXktMTIzNDU2LTAx","whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2LTAx"]},
	 "oldonly":{"kind":"standard","secrets":["whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2LTAx"]},
	 "other":{"kind":"standard","secrets":["whsec_b3RoZXItc2VjcmV0LWtleS0xMjM0NTYt"]}}}`)
	src, _ := set.Lookup("std")
	old, _ := set.Lookup("oldonly")
	other, _ := set.Lookup("other")
	body := []byte(`{"type":"user.created","data":{"id":1}}`)
	sign := func(s *Source, b []byte, at time.Time) http.Header {
		h, err := s.Sign(b, "msg_1", at)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tests := []struct {
		name string
		h    func() http.Header
		body []byte
		want inbox.Cause
	}{
		{"valid", func() http.Header { return sign(src, body, now) }, body, ""},
		{"rotated: signed with the old secret", func() http.Header { return sign(old, body, now) }, body, ""},
		{"svix header names", func() http.Header {
			h := sign(src, body, now)
			out := http.Header{}
			out.Set("Svix-Id", h.Get("Webhook-Id"))
			out.Set("Svix-Timestamp", h.Get("Webhook-Timestamp"))
			out.Set("Svix-Signature", h.Get("Webhook-Signature"))
			return out
		}, body, ""},
		{"several signatures, one good", func() http.Header {
			h := sign(src, body, now)
			h.Set("Webhook-Signature", "v1a,abc v1,AAAA "+h.Get("Webhook-Signature"))
			return h
		}, body, ""},
		{"tampered body", func() http.Header { return sign(src, body, now) }, []byte(`{"type":"user.deleted"}`), inbox.CauseSignatureMismatch},
		{"wrong secret", func() http.Header { return sign(other, body, now) }, body, inbox.CauseSignatureMismatch},
		{"signature header repeated, one good", func() http.Header {
			h := sign(src, body, now)
			h.Add("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=")
			return h
		}, body, ""},
		{"tampered id", func() http.Header { h := sign(src, body, now); h.Set("Webhook-Id", "msg_2"); return h }, body, inbox.CauseSignatureMismatch},
		{"stale", func() http.Header { return sign(src, body, now.Add(-6*time.Minute)) }, body, inbox.CauseTimestampOutOfTolerance},
		{"future", func() http.Header { return sign(src, body, now.Add(6*time.Minute)) }, body, inbox.CauseTimestampOutOfTolerance},
		{"missing signature", func() http.Header { h := sign(src, body, now); h.Del("Webhook-Signature"); return h }, body, inbox.CauseSignatureMissing},
		{"missing id", func() http.Header { h := sign(src, body, now); h.Del("Webhook-Id"); return h }, body, inbox.CauseSignatureMalformed},
		{"duplicated id", func() http.Header { h := sign(src, body, now); h.Add("Webhook-Id", "msg_2"); return h }, body, inbox.CauseSignatureMalformed},
		{"garbled signature", func() http.Header { h := sign(src, body, now); h.Set("Webhook-Signature", "v1,not base64!"); return h }, body, inbox.CauseSignatureMalformed},
		{"garbled timestamp", func() http.Header { h := sign(src, body, now); h.Set("Webhook-Timestamp", "soon"); return h }, body, inbox.CauseSignatureMalformed},
		{"signed non-JSON body", func() http.Header { return sign(src, []byte("hello"), now) }, []byte("hello"), inbox.CauseUnparsableBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h(), tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want == "" && (id.EventID != "msg_1" || id.EventType != "user.created") {
				t.Fatalf("identity = %+v", id)
			}
		})
	}
}

// The standard-webhooks library signs, we verify; we sign, it verifies.
func TestStandardWebhooksLibraryInterop(t *testing.T) {
	t.Parallel()
	const newKey, oldKey = "whsec_bmV3LXNlY3JldC1rZXktMTIzNDU2LTAx", "whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2LTAx"
	src := lookup(t, `{"sources":{"std":{"kind":"standard","secrets":["`+newKey+`","`+oldKey+`"]}}}`, "std")
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1","note":"<b>é</b>"}}`)

	// The library signs (with either secret), we verify, under both the
	// webhook-* and the svix-* header names.
	for _, secret := range []string{newKey, oldKey} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_lib_1", now, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{"Webhook", "Svix"} {
			h := headers(prefix+"-Id", "msg_lib_1", prefix+"-Timestamp", fmt.Sprint(now.Unix()), prefix+"-Signature", sig)
			id, err := src.Verifier.Verify(h, body, now)
			if err != nil || id.EventID != "msg_lib_1" || id.EventType != "invoice.paid" {
				t.Fatalf("%s headers, library signature: %+v, %v", prefix, id, err)
			}
		}
		stale, _ := wh.Sign("msg_lib_1", now.Add(-10*time.Minute), body)
		_, err = src.Verifier.Verify(headers("Webhook-Id", "msg_lib_1", "Webhook-Timestamp", fmt.Sprint(now.Add(-10*time.Minute).Unix()), "Webhook-Signature", stale), body, now)
		wantCause(t, err, inbox.CauseTimestampOutOfTolerance)
	}

	// We sign, the library verifies; it refuses a tampered body too.
	h, err := src.Sign(body, "msg_ours_1", now)
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := standardwebhooks.NewWebhook(newKey)
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		t.Fatalf("the standard-webhooks library refuses our signature: %v", err)
	}
	if err := wh.VerifyIgnoringTimestamp(append(body, ' '), h); err == nil {
		t.Fatal("the library accepts a tampered body")
	}
	other, _ := standardwebhooks.NewWebhook(oldKey)
	if err := other.VerifyIgnoringTimestamp(body, h); err == nil {
		t.Fatal("the library accepts our signature under another secret")
	}
}

func FuzzStandardVerify(f *testing.F) {
	// Secrets and a public key: arbitrary headers reach both the v1 and
	// the v1a checks; the round trip signs v1 (FuzzStandardV1aVerify signs
	// v1a).
	src := fuzzSource(f, `{"sources":{"s":{"kind":"standard","secrets":["`+specSecret+`","whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2LTAx"],"public_keys":["`+whpk(keyNew)+`"]}}}`, "s")
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
