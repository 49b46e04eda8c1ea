package sender_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func devSources(t *testing.T) *source.Set {
	t.Helper()
	set, err := source.Load(func(k string) string {
		if k == source.EnvSourcesFile {
			return "../../dev/sources.json"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Every sample the dev stack prints must verify with its own source, and
// two samples must be two different events.
func TestSampleVerifies(t *testing.T) {
	t.Parallel()
	set := devSources(t)
	now := time.Unix(1_700_000_000, 0)
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		a, err := sender.Sample(src, now)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sender.Sample(src, now)
		idA, err := src.Verifier.Verify(a.Header, a.Body, now)
		if err != nil {
			t.Fatalf("%s: sample does not verify: %v", name, err)
		}
		idB, _ := src.Verifier.Verify(b.Header, b.Body, now)
		if idA.EventID == "" || idA.EventID == idB.EventID || idA.EventType == "" {
			t.Fatalf("%s: identities %+v and %+v", name, idA, idB)
		}
	}
}

// The printed curl command, run by a real shell and curl, reaches the
// receiver with the exact signed bytes.
func TestCurlPostsTheSignedBytes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	set := devSources(t)
	now := time.Now()
	for _, name := range set.Names() {
		src, _ := set.Lookup(name)
		req, err := sender.Sample(src, now)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			_, err := src.Verifier.Verify(r.Header, body, now)
			got <- err
			w.WriteHeader(204)
		}))
		out, err := exec.Command("sh", "-c", req.Curl(srv.URL)).CombinedOutput()
		srv.Close()
		if err != nil {
			t.Fatalf("%s: curl: %v: %s", name, err, out)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: the receiver saw a request that does not verify: %v", name, err)
		}
	}
}

// Each kind's sample carries what its sender sends: the id and type where
// the kind reads them (headers or body, wherever an hmac source's paths
// point), and the unsigned metadata headers.
func TestSampleShapes(t *testing.T) {
	t.Parallel()
	set, err := source.Parse([]byte(`{"sources":{
	  "gh":{"kind":"github","secrets":["s_0123456789abcd"]},
	  "shop":{"kind":"shopify","secrets":["s_0123456789abcd"]},
	  "sq":{"kind":"square","secrets":["s_0123456789abcd"],"notification_url":"https://example.com/hooks/sq"},
	  "hnested":{"kind":"hmac","secrets":["s_0123456789abcd"],"signature_header":"X-Sig","event_id":{"json":"meta.event.id"},"event_type":{"json":"data.kind"}},
	  "hheaders":{"kind":"hmac","secrets":["base64:c2VjcmV0LTAxMjM0NTY3OA=="],"signature_header":"X-Sig","algorithm":"sha512","encoding":"base64",
	     "timestamp_header":"X-Ts","signed_content":"{id}.{timestamp}.{body}","event_id":{"header":"X-Event-Id"},"event_type":{"header":"X-Event-Type"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		source, wantType string
		wantMeta         []string
	}{
		{"gh", "issues", []string{"github_hook_id"}},
		{"shop", "orders/create", []string{"shopify_event_id", "shopify_shop_domain", "shopify_api_version", "shopify_triggered_at"}},
		{"sq", "order.created", nil},
		{"hnested", "invoice.payment_failed", nil},
		{"hheaders", "invoice.payment_failed", nil},
	}
	for _, tt := range tests {
		src, _ := set.Lookup(tt.source)
		req, err := sender.Sample(src, now)
		if err != nil {
			t.Fatalf("%s: %v", tt.source, err)
		}
		id, err := src.Verifier.Verify(req.Header, req.Body, now)
		if err != nil {
			t.Fatalf("%s: sample does not verify: %v", tt.source, err)
		}
		if id.EventID != req.EventID || id.EventType != tt.wantType {
			t.Fatalf("%s: identity %+v, request id %q", tt.source, id, req.EventID)
		}
		for _, k := range tt.wantMeta {
			if id.Metadata[k] == "" {
				t.Fatalf("%s: metadata %v lacks %s", tt.source, id.Metadata, k)
			}
		}
	}
}

// verifyOnly is a Verifier of no registered kind: it neither signs nor
// makes samples.
type verifyOnly struct{}

func (verifyOnly) Verify(http.Header, []byte, time.Time) (inbox.Identity, error) {
	return inbox.Identity{}, nil
}

// A source whose kind makes no sample gets an error, never a body shaped
// like another kind's.
func TestSampleOfAKindWithoutSample(t *testing.T) {
	t.Parallel()
	src := &source.Source{Name: "odd", Kind: "mystery", Verifier: verifyOnly{}}
	if req, err := sender.Sample(src, time.Unix(1_700_000_000, 0)); err == nil {
		t.Fatalf("Sample = %s, want an error", req.Body)
	}
}

// A source with an endpoint token is posted at its tokened path.
func TestTokenedSourceIsPostedAtItsPath(t *testing.T) {
	t.Parallel()
	const token = "tok_Zk3J9qLm2PzXv8RtYb6WcN4dHsAeUg1"
	set, err := source.Parse([]byte(`{"sources":{"gh":{"kind":"github","secrets":["s3cr3t-github-0123456789abcdefghijklmnopqrstuvwxyz"],"endpoint_token":"` + token + `","untokened_path":false}}}`))
	if err != nil {
		t.Fatal(err)
	}
	src, _ := set.Lookup("gh")
	r, err := sender.SignEvent(src, []byte(`{}`), "d-1", "ping", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.URL("http://127.0.0.1:3000/"); got != "http://127.0.0.1:3000/webhooks/gh/"+token {
		t.Fatalf("URL = %s", got)
	}
}
