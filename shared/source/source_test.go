package source

import (
	"errors"
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

func TestIdentityBounds(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"pay":{"kind":"stripe","secrets":["whsec_s_0123456789abcdefghijkl"]}}}`)
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
			h := http.Header{"Stripe-Signature": {stripeHeader("whsec_s_0123456789abcdefghijkl", now.Unix(), tt.body)}}
			_, err := src.Verifier.Verify(h, []byte(tt.body), now)
			wantCause(t, err, tt.want)
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
		{"negative tolerance", `{"sources":{"a":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"],"tolerance_seconds":-1}}}`, `tolerance_seconds`},
		{"bad name", `{"sources":{"A/b":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]}}}`, `the name must be`},
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
	doc := `{"sources":{"a":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"]}}}`
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
	 "s":{"kind":"stripe","secrets":["whsec_x_0123456789abcdefghijkl"],"tolerance_seconds":60},
	 "w":{"kind":"standard","secrets":["whsec_eC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamts"]},
	 "g":{"kind":"github","secrets":["x_0123456789abcd"]},
	 "h":{"kind":"hmac","secrets":["x_0123456789abcd"],"signature_header":"X-Sig","algorithm":"sha256","encoding":"hex","event_id":{"header":"X-Id"},"allow_unsigned_event_id":true}}}`)
	want := map[string]time.Duration{"s": time.Minute, "w": DefaultTolerance, "g": 0, "h": 0}
	for name, tol := range want {
		src, _ := set.Lookup(name)
		if got := src.Tolerance(); got != tol {
			t.Errorf("%s: Tolerance() = %v, want %v", name, got, tol)
		}
	}
}
