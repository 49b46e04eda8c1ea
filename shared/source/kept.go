package source

import (
	"net/http"
	"slices"
	"time"
)

// KeptHeaders returns the canonical names of the request headers the
// source's kind reads to verify a delivery and to identify it (its
// signature, timestamp, id and type headers, and the unsigned metadata its
// sender adds), sorted: all a delivery refused for its signature or its
// signed time needs to be verified again later, and nothing else of the
// request. The receiver keeps only these with a quarantined delivery.
func (s *Source) KeptHeaders() []string {
	return slices.Clone(s.keptHeaders)
}

// headerNamer is implemented by verifiers that read headers their signer
// does not set (Standard Webhooks' svix-* set besides webhook-*).
type headerNamer interface{ headerNames() []string }

// keptHeaderNames finds the headers a source's kind reads: those its
// signer sets and those its sample adds, which the kinds' tests hold to be
// what their verifiers read (TestEveryKindSampleVerifies), plus a
// headerNamer's. The sample is made and signed once, when the sources
// document is parsed.
func keptHeaderNames(s *Source) []string {
	names := map[string]bool{}
	if n, ok := s.Verifier.(headerNamer); ok {
		for _, h := range n.headerNames() {
			names[http.CanonicalHeaderKey(h)] = true
		}
	}
	now := time.Now()
	if sample, err := s.Sample(now); err == nil {
		for h := range sample.Header {
			names[http.CanonicalHeaderKey(h)] = true
		}
		if signed, err := s.SignEvent(sample.Body, sample.EventID, sample.EventType, now); err == nil {
			for h := range signed {
				names[http.CanonicalHeaderKey(h)] = true
			}
		}
	}
	// Samples carry the sender's User-Agent for realism; no verifier
	// reads it, so it is not the delivery's to keep.
	delete(names, "User-Agent")
	out := make([]string, 0, len(names))
	for h := range names {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
