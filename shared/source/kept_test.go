package source

import (
	"net/http"
	"slices"
	"testing"
)

// A delivery keeps only its kind's headers, and those are enough: every
// kind's signed sample verifies, with the same identity, from its kept
// headers alone, while a header no kind reads is not kept.
func TestKeptHeadersVerifyEveryKind(t *testing.T) {
	t.Parallel()
	for _, src := range sampleSources(t) {
		sample, err := src.Sample(now)
		if err != nil {
			t.Fatalf("%s: %v", src.Name, err)
		}
		sent := signSample(t, src, sample, now)
		sent.Set("Cookie", "session=never-kept")
		sent.Set("User-Agent", "curl/8")
		sent.Set("X-Forwarded-For", "203.0.113.9")
		kept := http.Header{}
		for _, name := range src.KeptHeaders() {
			if vs := sent.Values(name); len(vs) > 0 {
				kept[name] = vs
			}
		}
		if kept.Get("Cookie") != "" || kept.Get("User-Agent") != "" || kept.Get("X-Forwarded-For") != "" {
			t.Errorf("%s (%s): kept %v", src.Name, src.Kind, src.KeptHeaders())
		}
		id, err := src.Verifier.Verify(kept, sample.Body, now)
		if err != nil {
			t.Fatalf("%s (%s): the kept headers %v do not verify: %v", src.Name, src.Kind, src.KeptHeaders(), err)
		}
		if id.EventID != sample.EventID || id.EventType != sample.EventType {
			t.Errorf("%s (%s): identity %q/%q from the kept headers, sample %q/%q", src.Name, src.Kind, id.EventID, id.EventType, sample.EventID, sample.EventType)
		}
	}
}

// A Standard Webhooks source keeps both header sets its verifier reads,
// and one with public keys only (which cannot sign a sample) keeps them too.
func TestKeptHeadersOfStandardSources(t *testing.T) {
	t.Parallel()
	set := mustParse(t, `{"sources":{"std":{"kind":"standard","secrets":["whsec_eC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamts"]},
  "gh":{"kind":"github","secrets":["0123456789abcdef"]}}}`)
	std, _ := set.Lookup("std")
	for _, want := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Svix-Id", "Svix-Timestamp", "Svix-Signature"} {
		if !slices.Contains(std.KeptHeaders(), want) {
			t.Errorf("standard keeps %v, not %s", std.KeptHeaders(), want)
		}
	}
	gh, _ := set.Lookup("gh")
	for _, want := range []string{"X-Hub-Signature-256", "X-Github-Delivery", "X-Github-Event"} {
		if !slices.Contains(gh.KeptHeaders(), want) {
			t.Errorf("github keeps %v, not %s", gh.KeptHeaders(), want)
		}
	}
}
