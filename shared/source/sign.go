package source

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Signer signs a body the way the sender of a kind does, with the source's
// first (newest) secret. It powers `make dev`'s sample request, test
// deliveries and benchmarks: the very headers a real sender would send.
type Signer interface {
	// Sign returns the headers to send with body. eventID and eventType
	// are set as headers by the kinds that carry them there (Standard
	// Webhooks' webhook-id; GitHub's X-GitHub-Delivery and X-GitHub-Event;
	// Shopify's X-Shopify-Webhook-Id and X-Shopify-Topic; hmac sources
	// configured to read them from headers); kinds that read them from the
	// body ignore them.
	Sign(body []byte, eventID, eventType string, now time.Time) http.Header
}

// Sign returns the headers a sender of src's kind would send with body,
// without an event type header (kinds that read the type from a header then
// see an empty type). SignEvent also sets the type.
func (s *Source) Sign(body []byte, eventID string, now time.Time) (http.Header, error) {
	return s.SignEvent(body, eventID, "", now)
}

// SignEvent returns the headers a sender of src's kind would send with
// body, including the event id and type headers of the kinds that carry
// them in headers.
func (s *Source) SignEvent(body []byte, eventID, eventType string, now time.Time) (http.Header, error) {
	signer, ok := s.Verifier.(Signer)
	if !ok {
		return nil, errors.New("source " + s.Name + ": kind " + s.Kind + " cannot sign")
	}
	if r, ok := s.Verifier.(signReady); ok {
		if err := r.cannotSign(); err != nil {
			return nil, fmt.Errorf("source %s cannot sign: %w", s.Name, err)
		}
	}
	h := signer.Sign(body, eventID, eventType, now)
	if h.Get("Content-Type") == "" { // a kind whose bodies are not JSON (twilio's forms) sets its own
		h.Set("Content-Type", "application/json")
	}
	return h, nil
}

// signReady is implemented by verifiers whose configuration may leave them
// nothing to sign with (a standard source with public keys only): Sign is
// then not called, and the error says what to configure.
type signReady interface{ cannotSign() error }

// tolerant is implemented by verifiers that check a signed timestamp.
type tolerant interface{ tolerance() time.Duration }

// Tolerance returns how far a signed timestamp may be from now for src, or
// 0 when its sender signs no timestamp (a signed request then stays valid,
// and deduplication is the only replay defence).
func (s *Source) Tolerance() time.Duration {
	if t, ok := s.Verifier.(tolerant); ok {
		return t.tolerance()
	}
	return 0
}
