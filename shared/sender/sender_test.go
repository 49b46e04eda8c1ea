package sender_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/sender"
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
