package localendpoint_test

import (
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localendpoint"
)

func TestServesUntilClosedAndNamesItsEndpoint(t *testing.T) {
	t.Parallel()
	s, err := localendpoint.Start("AWS_ENDPOINT_URL_EXAMPLE", "localexample", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	if err != nil {
		t.Fatal(err)
	}
	env := s.Env()
	for _, want := range []string{
		"AWS_ENDPOINT_URL_EXAMPLE=" + s.Endpoint(),
		"AWS_ACCESS_KEY_ID=localexample",
		"AWS_SECRET_ACCESS_KEY=" + localendpoint.SecretKey("localexample"),
	} {
		if !slices.Contains(env, want) {
			t.Errorf("Env() = %q, missing %q", env, want)
		}
	}
	resp, err := http.Get(s.Endpoint() + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "/hello" {
		t.Errorf("body = %q, want the handler's answer %q", body, "/hello")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(s.Endpoint() + "/hello"); err == nil {
		resp.Body.Close()
		t.Error("a request after Close was answered")
	}
}
