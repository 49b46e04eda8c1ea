package source

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// sampleSourcesDoc adds configurations that move where a kind reads its
// identity to dev/sources.json's one source per kind.
const sampleSourcesDoc = `{"sources":{
  "std-kind":{"kind":"standard","secrets":["whsec_eC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamts"],"type_field":"kind"},
  "std-data":{"kind":"standard","secrets":["whsec_eC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamts"],"type_field":"data"},
  "std-none":{"kind":"standard","secrets":["whsec_eC0wMTIzNDU2Nzg5YWJjZGVmZ2hpamts"],"type_field":""},
  "h-nested":{"kind":"hmac","secrets":["s_0123456789abcd"],"signature_header":"X-Sig","event_id":{"json":"meta.event.id"},"event_type":{"json":"data.kind"}},
  "h-headers":{"kind":"hmac","secrets":["base64:c2VjcmV0LTAxMjM0NTY3OA=="],"signature_header":"X-Sig","algorithm":"sha512","encoding":"base64",
    "timestamp_header":"X-Ts","signed_content":"{id}.{timestamp}.{body}","event_id":{"header":"X-Event-Id"},"event_type":{"header":"X-Event-Type"}},
  "h-notype":{"kind":"hmac","secrets":["s_0123456789abcd"],"signature_header":"X-Sig","event_id":{"header":"X-Event-Id"},"allow_unsigned_event_id":true}}}`

// sampleSources returns dev/sources.json's sources and sampleSourcesDoc's.
func sampleSources(t *testing.T) []*Source {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "dev", "sources.json"))
	if err != nil {
		t.Fatal(err)
	}
	var srcs []*Source
	for _, d := range [][]byte{doc, []byte(sampleSourcesDoc)} {
		set := mustParse(t, string(d))
		for _, name := range set.Names() {
			src, _ := set.Lookup(name)
			srcs = append(srcs, src)
		}
	}
	return srcs
}

// signSample signs s as its sender would, adding the extra headers the way
// internal/sender does.
func signSample(t *testing.T, src *Source, s Sample, at time.Time) http.Header {
	t.Helper()
	h, err := src.SignEvent(s.Body, s.EventID, s.EventType, at)
	if err != nil {
		t.Fatalf("%s: %v", src.Name, err)
	}
	for k, vs := range s.Header {
		h[k] = vs
	}
	return h
}

// Every registered kind's sample, signed by the kind's signer, is accepted
// by the kind's own verifier with the sample's id and type, for every
// source of dev/sources.json (which has every kind) and for configurations
// that move the id and type. Two samples are two events.
func TestEveryKindSampleVerifies(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, src := range sampleSources(t) {
		a, err := src.Sample(now)
		if err != nil {
			t.Fatalf("%s: %v", src.Name, err)
		}
		b, err := src.Sample(now)
		if err != nil {
			t.Fatalf("%s: %v", src.Name, err)
		}
		if a.Header == nil || a.EventID == "" || a.EventID == b.EventID {
			t.Fatalf("%s: samples %+v and %+v", src.Name, a, b)
		}
		id, err := src.Verifier.Verify(signSample(t, src, a, now), a.Body, now)
		if err != nil {
			t.Fatalf("%s (%s): the sample does not verify: %v\n%s", src.Name, src.Kind, err, a.Body)
		}
		if id.EventID != a.EventID || id.EventType != a.EventType {
			t.Fatalf("%s (%s): identity %q/%q, sample %q/%q", src.Name, src.Kind, id.EventID, id.EventType, a.EventID, a.EventType)
		}
		covered[src.Kind] = true
	}
	for _, kind := range Kinds() {
		if !covered[kind] {
			t.Errorf("kind %s: no source of this kind had its sample checked (add one to dev/sources.json)", kind)
		}
	}
}

// The sources that say where the type is get one; those that read no type
// get none, rather than a type their verifier would not see.
func TestSampleTypeFollowsConfiguration(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"std-kind": "invoice.payment_failed", "std-data": "invoice.payment_failed", "std-none": "",
		"h-nested": "invoice.payment_failed", "h-headers": "invoice.payment_failed", "h-notype": "",
	}
	set := mustParse(t, sampleSourcesDoc)
	for name, typ := range want {
		src, _ := set.Lookup(name)
		s, err := src.Sample(now)
		if err != nil {
			t.Fatal(err)
		}
		if s.EventType != typ {
			t.Errorf("%s: sample type %q, want %q", name, s.EventType, typ)
		}
	}
}

// verifyOnly is a Verifier from outside the registry: it neither signs nor
// makes samples.
type verifyOnly struct{}

func (verifyOnly) Verify(http.Header, []byte, time.Time) (inbox.Identity, error) {
	return inbox.Identity{}, nil
}

// A Source whose verifier makes no sample is an error, not a sample shaped
// like another kind's.
func TestSampleWithoutSampler(t *testing.T) {
	t.Parallel()
	src := &Source{Name: "odd", Kind: "mystery", Verifier: verifyOnly{}}
	if s, err := src.Sample(now); err == nil {
		t.Fatalf("Sample = %+v, want an error", s)
	}
	if _, err := src.SignEvent([]byte(`{}`), "id", "", now); err == nil {
		t.Fatal("SignEvent without a signer must be an error")
	}
}

// Operators search metadata by the header it came from (MetadataHeaders):
// every key a kind's sample leaves in the metadata is listed there, under
// its kind, and a header names one key whatever the kind.
func TestMetadataHeadersListEveryMetadataKey(t *testing.T) {
	t.Parallel()
	listed := map[string]map[string]bool{}
	keyOf := map[string]string{}
	for _, k := range MetadataHeaders() {
		if listed[k.Kind] == nil {
			listed[k.Kind] = map[string]bool{}
		}
		listed[k.Kind][k.Key] = true
		h := http.CanonicalHeaderKey(k.Header)
		if prev, ok := keyOf[h]; ok && prev != k.Key {
			t.Errorf("header %s kept as %q and %q", h, prev, k.Key)
		}
		keyOf[h] = k.Key
	}
	// Twilio's form body, not a header, gives these.
	fromBody := map[string]bool{"twilio_account_sid": true, "twilio_sid": true}
	seen := 0
	for _, src := range sampleSources(t) {
		a, err := src.Sample(now)
		if err != nil {
			t.Fatalf("%s: %v", src.Name, err)
		}
		id, err := src.Verifier.Verify(signSample(t, src, a, now), a.Body, now)
		if err != nil {
			t.Fatalf("%s: %v", src.Name, err)
		}
		for key := range id.Metadata {
			seen++
			if !listed[src.Kind][key] && !fromBody[key] {
				t.Errorf("%s (%s): metadata key %q is not in MetadataHeaders", src.Name, src.Kind, key)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no sample kept any metadata: nothing was checked")
	}
}
