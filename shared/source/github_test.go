package source

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v75/github"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// lookup parses doc and returns its source called name.
func lookup(t *testing.T, doc, name string) *Source {
	t.Helper()
	src, ok := mustParse(t, doc).Lookup(name)
	if !ok {
		t.Fatalf("no source %q", name)
	}
	return src
}

// fixture reads a body from testdata, byte for byte.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// headers builds a header from name, value pairs; a repeated name is sent
// twice.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// GitHub's documented example ("Validating webhook deliveries"): the secret
// "It's a Secret to Everybody" and the payload "Hello, World!" give this
// signature. (Checked with: printf %s 'Hello, World!' | openssl dgst
// -sha256 -hmac "It's a Secret to Everybody".)
const (
	githubDocSecret    = "It's a Secret to Everybody"
	githubDocPayload   = "Hello, World!"
	githubDocSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestGitHubDocumentedExample(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"gh":{"kind":"github","secrets":["It's a Secret to Everybody"]}}}`, "gh")
	h := headers("X-Hub-Signature-256", githubDocSignature, "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event", "ping")
	// The payload is not JSON: github takes nothing from the body.
	id, err := src.Verifier.Verify(h, []byte(githubDocPayload), now)
	if err != nil {
		t.Fatalf("GitHub's documented example does not verify: %v", err)
	}
	if id.EventID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || id.EventType != "ping" {
		t.Fatalf("identity = %+v", id)
	}
	signed, err := src.SignEvent([]byte(githubDocPayload), "d1", "ping", now)
	if err != nil || signed.Get("X-Hub-Signature-256") != githubDocSignature {
		t.Fatalf("Sign = %q, %v; want GitHub's %q", signed.Get("X-Hub-Signature-256"), err, githubDocSignature)
	}
}

// go-github, an independent implementation, accepts what we sign and
// refuses it once the body changes; and we accept a fixture signed by
// OpenSSL (printf … | openssl dgst -sha256 -hmac gh-test-secret_0).
func TestGitHubIndependentImplementations(t *testing.T) {
	t.Parallel()
	src := lookup(t, `{"sources":{"gh":{"kind":"github","secrets":["gh-test-secret_0"]}}}`, "gh")
	body := fixture(t, "github_issues_opened.json")
	h, err := src.SignEvent(body, "e0f9b4a2-0000-4000-8000-000000000001", "issues", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := github.ValidateSignature(h.Get(github.SHA256SignatureHeader), body, []byte("gh-test-secret_0")); err != nil {
		t.Fatalf("go-github refuses our signature: %v", err)
	}
	if err := github.ValidateSignature(h.Get(github.SHA256SignatureHeader), append(bytes.Clone(body), ' '), []byte("gh-test-secret_0")); err == nil {
		t.Fatal("go-github accepts a tampered body")
	}
	req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header = h
	if got, err := github.ValidatePayload(req, []byte("gh-test-secret_0")); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("go-github ValidatePayload: %v", err)
	}
	const opensslSig = "sha256=7a8576bba349572672f83858a8c4c57f329f9bd38cc35b839d6db7ec9de0ba39"
	id, err := src.Verifier.Verify(headers("X-Hub-Signature-256", opensslSig, "X-GitHub-Delivery", "d-1", "X-GitHub-Event", "issues"), body, now)
	if err != nil || id.EventID != "d-1" || id.EventType != "issues" {
		t.Fatalf("OpenSSL-signed fixture: %+v, %v", id, err)
	}
}

func TestGitHubVerify(t *testing.T) {
	t.Parallel()
	doc := `{"sources":{"gh":{"kind":"github","secrets":["new-secret_01234","old-secret_01234"]},
	 "oldonly":{"kind":"github","secrets":["old-secret_01234"]},"other":{"kind":"github","secrets":["other-secret_012"]}}}`
	set := mustParse(t, doc)
	src, _ := set.Lookup("gh")
	body := fixture(t, "github_issues_opened.json")
	const delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	signWith := func(name string, b []byte) http.Header {
		s, _ := set.Lookup(name)
		h, err := s.SignEvent(b, delivery, "issues", now)
		if err != nil {
			t.Fatal(err)
		}
		h.Set("X-GitHub-Hook-ID", "292430182")
		return h
	}
	sig := func() string { return signWith("gh", body).Get("X-Hub-Signature-256") }
	with := func(edit func(h http.Header)) func() http.Header {
		return func() http.Header { h := signWith("gh", body); edit(h); return h }
	}
	tests := []struct {
		name     string
		h        func() http.Header
		body     []byte
		want     inbox.Cause
		wantType string
	}{
		{"valid", with(func(http.Header) {}), body, "", "issues"},
		{"rotated: signed with the old secret", func() http.Header { return signWith("oldonly", body) }, body, "", "issues"},
		{"upper-case hex", with(func(h http.Header) {
			h.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(sig(), "sha256=")))
		}), body, "", "issues"},
		{"SHA-1 header beside is ignored", with(func(h http.Header) { h.Set("X-Hub-Signature", "sha1=0000") }), body, "", "issues"},
		{"no event header: no type", with(func(h http.Header) { h.Del("X-GitHub-Event") }), body, "", ""},
		{"non-JSON body is fine", func() http.Header { return signWith("gh", []byte("payload=%7B%7D")) }, []byte("payload=%7B%7D"), "", "issues"},
		{"tampered body", with(func(http.Header) {}), append(bytes.Clone(body), ' '), inbox.CauseSignatureMismatch, ""},
		{"wrong secret", func() http.Header { return signWith("other", body) }, body, inbox.CauseSignatureMismatch, ""},
		{"missing signature", with(func(h http.Header) { h.Del("X-Hub-Signature-256") }), body, inbox.CauseSignatureMissing, ""},
		{"only the SHA-1 header", with(func(h http.Header) {
			h.Set("X-Hub-Signature", "sha1="+strings.Repeat("0", 40))
			h.Del("X-Hub-Signature-256")
		}), body, inbox.CauseSignatureMissing, ""},
		{"empty signature", with(func(h http.Header) { h.Set("X-Hub-Signature-256", " ") }), body, inbox.CauseSignatureMissing, ""},
		{"duplicated signature header", with(func(h http.Header) { h.Add("X-Hub-Signature-256", sig()) }), body, inbox.CauseSignatureMalformed, ""},
		{"folded duplicate (proxy)", with(func(h http.Header) { h.Set("X-Hub-Signature-256", sig()+", "+sig()) }), body, inbox.CauseSignatureMalformed, ""},
		{"no sha256= prefix", with(func(h http.Header) { h.Set("X-Hub-Signature-256", strings.TrimPrefix(sig(), "sha256=")) }), body, inbox.CauseSignatureMalformed, ""},
		{"sha1= prefix", with(func(h http.Header) { h.Set("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(sig(), "sha256=")) }), body, inbox.CauseSignatureMalformed, ""},
		{"not hex", with(func(h http.Header) { h.Set("X-Hub-Signature-256", "sha256=zz"+sig()[9:]) }), body, inbox.CauseSignatureMalformed, ""},
		{"truncated", with(func(h http.Header) { h.Set("X-Hub-Signature-256", sig()[:len(sig())-2]) }), body, inbox.CauseSignatureMalformed, ""},
		{"missing delivery id", with(func(h http.Header) { h.Del("X-GitHub-Delivery") }), body, inbox.CauseMissingEventID, ""},
		{"empty delivery id", with(func(h http.Header) { h.Set("X-GitHub-Delivery", "") }), body, inbox.CauseMissingEventID, ""},
		{"duplicated delivery id", with(func(h http.Header) { h.Add("X-GitHub-Delivery", "other") }), body, inbox.CauseMissingEventID, ""},
		{"delivery id of 256 bytes", with(func(h http.Header) { h.Set("X-GitHub-Delivery", strings.Repeat("a", 256)) }), body, inbox.CauseMissingEventID, ""},
		{"control character in delivery id", with(func(h http.Header) { h.Set("X-GitHub-Delivery", "a\x01b") }), body, inbox.CauseMissingEventID, ""},
		{"duplicated event header", with(func(h http.Header) { h.Add("X-GitHub-Event", "push") }), body, inbox.CauseInvalidEventType, ""},
		{"event name too long", with(func(h http.Header) { h.Set("X-GitHub-Event", strings.Repeat("e", 256)) }), body, inbox.CauseInvalidEventType, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := src.Verifier.Verify(tt.h(), tt.body, now)
			wantCause(t, err, tt.want)
			if tt.want != "" {
				return
			}
			if id.EventID != delivery || id.EventType != tt.wantType {
				t.Fatalf("identity = %+v", id)
			}
			if id.Metadata["github_hook_id"] != "292430182" {
				t.Fatalf("metadata = %v", id.Metadata)
			}
		})
	}
}

func FuzzGitHubVerify(f *testing.F) {
	src := fuzzSource(f, `{"sources":{"g":{"kind":"github","secrets":["It's a Secret to Everybody","gh-old_012345678"]}}}`, "g")
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
