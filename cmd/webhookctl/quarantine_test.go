package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/sender"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/factory"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/field"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

const quarantineSources = `{"sources": {"github": {"kind": "github", "secrets": ["gh-secret-ctl-0123456789abc"]}}}`

// quarantineFixture holds two quarantined GitHub deliveries: one the
// current secret verifies, and a forged one whose body and headers carry
// terminal escapes.
func quarantineFixture(t *testing.T) (f *opsFixture, good, forged int64) {
	t.Helper()
	f = newOpsFixture(t)
	f.env["WEBHOOK_SOURCES"] = quarantineSources
	set, err := source.Parse([]byte(quarantineSources))
	if err != nil {
		t.Fatal(err)
	}
	gh, _ := set.Lookup("github")
	body := []byte(`{"action":"opened","issue":{"id":11}}`)
	sr, err := sender.SignEvent(gh, body, "ctl-q-1", "issues", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good = factory.Quarantined(f.ctx, t, f.store, &factory.QuarantinedOpts{Source: "github", Kind: "github", Header: sr.Header, Body: body})
	forged = factory.Quarantined(f.ctx, t, f.store, &factory.QuarantinedOpts{Source: "github", Kind: "github",
		Header: http.Header{"X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}, "X-Github-Event": {"\x1b]0;pwned\x07issues"}},
		Body:   []byte("{\"title\":\"\x1b[31mred\x1b[0m\"}")})
	return f, good, forged
}

// list and show print a quarantined delivery with every control character
// escaped: nothing of an unauthenticated request drives the terminal.
func TestQuarantineListAndShowEscape(t *testing.T) {
	t.Parallel()
	f, _, forged := quarantineFixture(t)
	list := f.runOK("quarantine", "list")
	if !strings.Contains(list, "signature_mismatch") || strings.Count(list, "github") != 2 {
		t.Fatalf("list:\n%s", list)
	}
	show := f.runOK("quarantine", "show", itoa(forged))
	for _, want := range []string{"refused for", "HEADERS KEPT", "X-Hub-Signature-256: sha256=0000", "not authenticated", `\u001b[31mred`} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if strings.ContainsRune(show, 0x1b) || strings.ContainsRune(show, 0x07) {
		t.Fatalf("show printed a raw control character:\n%q", show)
	}
	var d operations.QuarantinedDetail
	f.runJSON(&d, "quarantine", "show", itoa(forged))
	if d.ID != forged || d.Headers["X-Github-Event"][0] != "\x1b]0;pwned\x07issues" {
		t.Fatalf("--json: %+v", d)
	}
	if _, _, err := f.run("quarantine", "show", "0"); err == nil {
		t.Fatal("show 0 ran")
	}
}

// reingest counts without --yes and changes nothing; with it, it stores
// what the current secret verifies and keeps the rest with its failure;
// purge deletes what is left, each recorded.
func TestQuarantineReingestAndPurge(t *testing.T) {
	t.Parallel()
	f, _, forged := quarantineFixture(t)
	if _, _, err := f.run("quarantine", "reingest"); err == nil || !strings.Contains(err.Error(), "--all") {
		t.Fatalf("reingest without a selection: %v", err)
	}
	if out := f.runOK("quarantine", "reingest", "--source", "github"); !strings.Contains(out, "dry run: 2 ") || !strings.Contains(out, "--yes") {
		t.Fatalf("reingest without --yes:\n%s", out)
	}
	if n := f.count(`SELECT count(*) FROM webhook_events`); n != 0 {
		t.Fatalf("a dry run stored %d events", n)
	}
	var res operations.ReingestResult
	f.runJSON(&res, "quarantine", "reingest", "--source", "github", "--yes", "--reason", "secret fixed")
	field.Must(t, "re-ingest", field.Eq("Stored", res.Stored, 1), field.Eq("Refused", res.Refused, 1))
	if n := f.count(`SELECT count(*) FROM webhook_events WHERE provider = 'github' AND event_id = 'ctl-q-1'`); n != 1 {
		t.Fatal("the verified delivery was not stored")
	}
	list := f.runOK("quarantine", "list")
	if !strings.Contains(list, itoa(forged)) || !strings.Contains(list, "signature_mismatch: ") {
		t.Fatalf("what still fails stays, with its failure:\n%s", list)
	}
	if _, _, err := f.run("quarantine", "purge"); err == nil {
		t.Fatal("purge without a selection ran")
	}
	out := f.runOK("quarantine", "purge", itoa(forged), "--yes", "--reason", "forged")
	if !strings.Contains(out, "purged 1 ") {
		t.Fatalf("purge:\n%s", out)
	}
	if out := f.runOK("quarantine", "list"); !strings.Contains(out, "no quarantined deliveries") {
		t.Fatalf("after the purge:\n%s", out)
	}
	acts := f.runOK("actions")
	if !strings.Contains(acts, "reingest") || !strings.Contains(acts, "purge") {
		t.Fatalf("actions:\n%s", acts)
	}
}

// Without the sources document a re-ingest is refused, saying so.
func TestQuarantineReingestNeedsTheSources(t *testing.T) {
	t.Parallel()
	f, good, _ := quarantineFixture(t)
	delete(f.env, "WEBHOOK_SOURCES")
	_, _, err := f.run("quarantine", "reingest", itoa(good), "--yes")
	if err == nil || !strings.Contains(err.Error(), "sources") {
		t.Fatalf("reingest without sources: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
