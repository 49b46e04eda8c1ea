package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// now is the fixed clock of these tests: no test sleeps or reads the time.
var now = time.Unix(1_700_000_000, 0)

func mustParse(t *testing.T, doc string) *Set {
	t.Helper()
	set, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return set
}

func wantCause(t *testing.T, err error, want inbox.Cause) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want cause %s, got success", want)
	}
	if got := inbox.CauseOf(err); got != want {
		t.Fatalf("want cause %s, got %s (%v)", want, got, err)
	}
}

// stripeHeader signs like Stripe does, independently of the code under test.
func stripeHeader(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.%s", ts, body)
	return fmt.Sprintf("t=%d,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
}

func TestStripeVerify(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"pay":{"kind":"stripe","secrets":["whsec_new","whsec_old"]}}}`)
	src, _ := set.Lookup("pay")
	body := `{"id":"evt_1","type":"invoice.paid","data":{}}`
	ts := now.Unix()
	good := stripeHeader("whsec_new", ts, body)
	old := stripeHeader("whsec_old", ts, body)
	v1 := func(h string) string { _, s, _ := strings.Cut(h, "v1="); return s }

	tests := []struct {
		name   string
		header []string // Stripe-Signature values; nil = absent
		body   string
		want   inbox.Cause
		wantID string
	}{
		{"valid", []string{good}, body, "", "evt_1"},
		{"rotated: signed with the old secret", []string{old}, body, "", "evt_1"},
		{"several v1 entries, one good", []string{fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, strings.Repeat("ab", 32), v1(good))}, body, "", "evt_1"},
		{"v0 and garbled v1 beside a good one", []string{fmt.Sprintf("t=%d,v0=zz,v1=nothex,v1=%s", ts, v1(good))}, body, "", "evt_1"},
		{"tampered body", []string{good}, strings.Replace(body, "evt_1", "evt_2", 1), inbox.CauseSignatureMismatch, ""},
		{"wrong secret", []string{stripeHeader("whsec_other", ts, body)}, body, inbox.CauseSignatureMismatch, ""},
		{"stale timestamp", []string{stripeHeader("whsec_new", ts-301, body)}, body, inbox.CauseTimestampOutOfTolerance, ""},
		{"future timestamp", []string{stripeHeader("whsec_new", ts+301, body)}, body, inbox.CauseTimestampOutOfTolerance, ""},
		{"edge of tolerance", []string{stripeHeader("whsec_new", ts-300, body)}, body, "", "evt_1"},
		{"missing header", nil, body, inbox.CauseSignatureMissing, ""},
		{"empty header", []string{""}, body, inbox.CauseSignatureMissing, ""},
		{"garbled header", []string{"garbage"}, body, inbox.CauseSignatureMalformed, ""},
		{"no timestamp", []string{"v1=" + v1(good)}, body, inbox.CauseSignatureMalformed, ""},
		{"no v1", []string{fmt.Sprintf("t=%d", ts)}, body, inbox.CauseSignatureMalformed, ""},
		{"timestamp not a number", []string{"t=abc,v1=" + v1(good)}, body, inbox.CauseSignatureMalformed, ""},
		{"duplicated header", []string{good, stripeHeader("whsec_new", ts+1, body)}, body, inbox.CauseSignatureMalformed, ""},
		{"signed empty body", []string{stripeHeader("whsec_new", ts, "")}, "", inbox.CauseUnparsableBody, ""},
		{"signed non-JSON body", []string{stripeHeader("whsec_new", ts, "id=evt_1")}, "id=evt_1", inbox.CauseUnparsableBody, ""},
		{"signed JSON array", []string{stripeHeader("whsec_new", ts, "[1]")}, "[1]", inbox.CauseUnparsableBody, ""},
		{"signed body without id", []string{stripeHeader("whsec_new", ts, `{"type":"x"}`)}, `{"type":"x"}`, inbox.CauseMissingEventID, ""},
		{"numeric id", []string{stripeHeader("whsec_new", ts, `{"id":12}`)}, `{"id":12}`, inbox.CauseUnparsableBody, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for _, v := range tt.header {
				h.Add("Stripe-Signature", v)
			}
			id, err := src.Verifier.Verify(h, []byte(tt.body), now)
			wantCause(t, err, tt.want)
			if tt.wantID != "" && id.EventID != tt.wantID {
				t.Fatalf("event id = %q, want %q", id.EventID, tt.wantID)
			}
		})
	}
}

func TestIdentityBounds(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"pay":{"kind":"stripe","secrets":["s"]}}}`)
	src, _ := set.Lookup("pay")
	tests := []struct {
		name, body string
		want       inbox.Cause
	}{
		{"id of 255 bytes", `{"id":"` + strings.Repeat("a", 255) + `"}`, ""},
		{"id of 256 bytes", `{"id":"` + strings.Repeat("a", 256) + `"}`, inbox.CauseMissingEventID},
		{"id of 10 000 characters", `{"id":"` + strings.Repeat("é", 10000) + `"}`, inbox.CauseMissingEventID},
		{"empty id", `{"id":""}`, inbox.CauseMissingEventID},
		{"null id", `{"id":null}`, inbox.CauseMissingEventID},
		{"NUL in id", `{"id":"a\u0000b"}`, inbox.CauseMissingEventID},
		{"newline in id", `{"id":"a\nb"}`, inbox.CauseMissingEventID},
		{"invalid UTF-8 in id", "{\"id\":\"a\xffb\"}", inbox.CauseUnparsableBody},
		{"SQL-looking id is just text", `{"id":"x'); DROP TABLE webhook_events;--"}`, ""},
		{"type too long", `{"id":"a","type":"` + strings.Repeat("t", 256) + `"}`, inbox.CauseInvalidEventType},
		{"NUL elsewhere in the body is fine", `{"id":"a","note":"x\u0000y"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Stripe-Signature": {stripeHeader("s", now.Unix(), tt.body)}}
			_, err := src.Verifier.Verify(h, []byte(tt.body), now)
			wantCause(t, err, tt.want)
		})
	}
}

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
	set := mustParse(t, `{"sources":{"std":{"kind":"standard","secrets":["whsec_bmV3LXNlY3JldC1rZXktMTIzNDU2","whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2"]},
	 "oldonly":{"kind":"standard","secrets":["whsec_b2xkLXNlY3JldC1rZXktMTIzNDU2"]},
	 "other":{"kind":"standard","secrets":["whsec_b3RoZXItc2VjcmV0LWtleS0xMjM0NTY="]}}}`)
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

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, wantInError string }{
		{"not JSON", `{`, "invalid document"},
		{"no sources", `{"sources":{}}`, "no source"},
		{"unknown top-level field", `{"source":{}}`, "unknown field"},
		{"unknown kind", `{"sources":{"a":{"kind":"paypal","secrets":["x"]}}}`, `source "a": field "kind": unknown kind "paypal"`},
		{"missing kind", `{"sources":{"a":{"secrets":["x"]}}}`, `field "kind" is required`},
		{"no secrets", `{"sources":{"a":{"kind":"stripe"}}}`, `source "a": field "secrets"`},
		{"empty secret", `{"sources":{"a":{"kind":"stripe","secrets":[" "]}}}`, `secret #1 is empty`},
		{"misspelt field", `{"sources":{"a":{"kind":"stripe","secret":"x"}}}`, `unknown field "secret"`},
		{"bad standard secret", `{"sources":{"a":{"kind":"standard","secrets":["whsec_???"]}}}`, `not a whsec_-prefixed base64 key`},
		{"negative tolerance", `{"sources":{"a":{"kind":"stripe","secrets":["x"],"tolerance_seconds":-1}}}`, `tolerance_seconds`},
		{"bad name", `{"sources":{"A/b":{"kind":"stripe","secrets":["x"]}}}`, `the name must be`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantInError) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.wantInError)
			}
			if strings.Contains(err.Error(), "whsec_???") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	doc := `{"sources":{"a":{"kind":"stripe","secrets":["x"]}}}`
	path := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if set, err := Load(env(map[string]string{EnvSources: doc})); err != nil || len(set.Names()) != 1 {
		t.Fatalf("inline: %v", err)
	}
	if set, err := Load(env(map[string]string{EnvSourcesFile: path})); err != nil || set.Names()[0] != "a" {
		t.Fatalf("file: %v", err)
	}
	if _, err := Load(env(nil)); err == nil {
		t.Fatal("no configuration must be an error")
	}
	if _, err := Load(env(map[string]string{EnvSources: doc, EnvSourcesFile: path})); err == nil {
		t.Fatal("both variables must be an error")
	}
	if _, err := Load(env(map[string]string{EnvSourcesFile: path + ".missing"})); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestTolerance(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{
	 "s":{"kind":"stripe","secrets":["x"],"tolerance_seconds":60},
	 "w":{"kind":"standard","secrets":["whsec_eA=="]},
	 "g":{"kind":"github","secrets":["x"]},
	 "h":{"kind":"hmac","secrets":["x"],"signature_header":"X-Sig","algorithm":"sha256","encoding":"hex","event_id":{"header":"X-Id"}}}}`)
	want := map[string]time.Duration{"s": time.Minute, "w": DefaultTolerance, "g": 0, "h": 0}
	for name, tol := range want {
		src, _ := set.Lookup(name)
		if got := src.Tolerance(); got != tol {
			t.Errorf("%s: Tolerance() = %v, want %v", name, got, tol)
		}
	}
}
