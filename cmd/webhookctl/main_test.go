package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/secretstest"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

func TestMain(m *testing.M) {
	// The commands default to dev/sources.json, relative to the repository.
	if err := os.Chdir(filepath.Join("..", "..")); err != nil {
		panic(err)
	}
	// The AWS SDK reads secrets from the stand-in and signs with fake keys.
	secretstest.Use()
	pgtest.Main(m)
}

// run executes webhookctl with args and returns its output.
func run(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if stdin != nil {
		cmd.SetIn(stdin)
	}
	cmd.SetArgs(args)
	// Away from the checkout, whose own make dev may be running.
	err := cmd.ExecuteContext(withStackDir(context.Background(), t.TempDir()))
	return out.String(), err
}

func TestSourcesCheck(t *testing.T) {
	out, err := run(t, nil, "sources", "check", "--base-url", "https://hooks.example.com", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Sources []struct{ Name, Kind, URL string } `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, s := range res.Sources {
		kinds[s.Kind] = true
		if s.URL != "https://hooks.example.com/webhooks/"+s.Name {
			t.Fatalf("url = %s", s.URL)
		}
	}
	for _, k := range source.Kinds() {
		if !kinds[k] {
			t.Fatalf("dev sources lack kind %s: %s", k, out)
		}
	}
	out, _ = run(t, nil, "sources", "check")
	if strings.Contains(out, "whsec_") {
		t.Fatalf("sources check printed a secret:\n%s", out)
	}
}

// A source with an endpoint token is printed with its tokened URL, and
// where it is reachable.
func TestSourcesCheckPrintsTheTokenedURL(t *testing.T) {
	const token = "tok_Zk3J9qLm2PzXv8RtYb6WcN4dHsAeUg1"
	t.Setenv(source.EnvSources, `{"sources":{
	  "plain":  {"kind": "stripe", "secrets": ["whsec_plain_secret_0123456789abcdef"]},
	  "both":   {"kind": "stripe", "secrets": ["whsec_both_secret_0123456789abcdef"], "endpoint_token": "`+token+`"},
	  "hidden": {"kind": "stripe", "secrets": ["whsec_hidden_secret_0123456789abcdef"], "endpoint_token": "`+token+`", "untokened_path": false, "silent_after": "6h"}}}`)
	out, err := run(t, nil, "sources", "check", "--base-url", "https://hooks.example.com/", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Sources []struct {
			Name, Endpoint, URL string
			SilentAfter         string `json:"silent_after"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"plain":  {"untokened", "https://hooks.example.com/webhooks/plain"},
		"both":   {"token, untokened open", "https://hooks.example.com/webhooks/both/" + token},
		"hidden": {"token only", "https://hooks.example.com/webhooks/hidden/" + token},
	}
	for _, s := range res.Sources {
		if w := want[s.Name]; s.Endpoint != w[0] || s.URL != w[1] {
			t.Errorf("%s: %s %s, want %v", s.Name, s.Endpoint, s.URL, w)
		}
		if (s.Name == "hidden") != (s.SilentAfter == "6h0m0s") {
			t.Errorf("%s: silent_after %q", s.Name, s.SilentAfter)
		}
	}
	if out, _ := run(t, nil, "sources", "check"); !strings.Contains(out, "/webhooks/hidden/"+token) || strings.Contains(out, "whsec_") ||
		!strings.Contains(out, "silent after: hidden: 6h0m0s without a delivery") {
		t.Fatalf("table:\n%s", out)
	}
}

func TestSourcesCheckRefusesABadDocument(t *testing.T) {
	t.Setenv(source.EnvSources, `{"sources":{"a":{"kind":"stripe","secrets":[]}}}`)
	if _, err := run(t, nil, "sources", "check"); err == nil || !strings.Contains(err.Error(), `source "a"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestMigrateUpAndStatus(t *testing.T) {
	url := pgtest.URL(t)
	t.Setenv("DATABASE_URL", url)
	out, err := run(t, nil, "migrate", "up")
	if err != nil || !strings.Contains(out, "schema at version") {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	out, err = run(t, nil, "migrate", "status")
	if err != nil || strings.Contains(out, "pending") || !strings.Contains(out, "applied") {
		t.Fatalf("migrate status: %v\n%s", err, out)
	}
}

// sources check reads the command's environment (the operator commands'
// one source of settings), not only the process's.
func TestSourcesCheckReadsTheCommandEnvironment(t *testing.T) {
	t.Parallel()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"sources", "check", "--json"})
	env := map[string]string{source.EnvSources: `{"sources":{"only-here":{"kind":"github","secrets":["x_0123456789abcd"]}}}`}
	ctx := withStackDir(withEnv(context.Background(), func(k string) string { return env[k] }), t.TempDir())
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"only-here"`) || strings.Contains(out.String(), `"stripe"`) {
		t.Fatalf("sources check ignored the command's environment:\n%s", out.String())
	}
}

// sources check explains the hmac template rule: an ambiguous
// template is refused with the reason, an accepted one with {id} next to
// {body} is printed with the separator its ids may not hold.
func TestSourcesCheckExplainsTheHMACTemplate(t *testing.T) {
	hmacSrc := func(tmpl string) string {
		return `{"sources":{"acme":{"kind":"hmac","secrets":["acme-secret-0123456789"],"signature_header":"X-Sig",
		  "signed_content":"` + tmpl + `","event_id":{"header":"X-Id"}}}}`
	}
	t.Setenv(source.EnvSources, hmacSrc("{id}{body}"))
	if _, err := run(t, nil, "sources", "check"); err == nil || !strings.Contains(err.Error(), `source "acme"`) ||
		!strings.Contains(err.Error(), `"{id}{body}" is ambiguous`) {
		t.Fatalf("an ambiguous template: %v", err)
	}
	t.Setenv(source.EnvSources, hmacSrc("{id}.{body}"))
	out, err := run(t, nil, "sources", "check")
	if err != nil || !strings.Contains(out, `note: acme: signed_content "{id}.{body}": an id holding "." is refused`) {
		t.Fatalf("sources check: %v\n%s", err, out)
	}
	out, err = run(t, nil, "sources", "check", "--json")
	if err != nil || !strings.Contains(out, `"note":`) {
		t.Fatalf("sources check --json: %v\n%s", err, out)
	}
}
