package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Signer signs a body the way the sender of a kind does, with the source's
// first (newest) secret. It powers `make dev`'s sample request, test
// deliveries and benchmarks: the very headers a real sender would send.
type Signer interface {
	// Sign returns the headers to send with body. eventID is used by kinds
	// that carry the id in a header (Standard Webhooks); others ignore it.
	Sign(body []byte, eventID string, now time.Time) http.Header
}

// Sign returns the headers a sender of src's kind would send with body.
func (s *Source) Sign(body []byte, eventID string, now time.Time) (http.Header, error) {
	signer, ok := s.Verifier.(Signer)
	if !ok {
		return nil, errors.New("source " + s.Name + ": kind " + s.Kind + " cannot sign")
	}
	h := signer.Sign(body, eventID, now)
	h.Set("Content-Type", "application/json")
	return h, nil
}

// Sign implements Signer with Stripe's Stripe-Signature header.
func (v *stripeVerifier) Sign(body []byte, _ string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, v.secrets[0])
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("Stripe-Signature", fmt.Sprintf("t=%s,v1=%s", ts, hex.EncodeToString(mac.Sum(nil))))
	return h
}

// Sign implements Signer with the Standard Webhooks headers.
func (v *standardVerifier) Sign(body []byte, eventID string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, v.keys[0])
	mac.Write([]byte(eventID + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("Webhook-Id", eventID)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}
