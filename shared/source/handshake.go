package source

import (
	"crypto/hmac"
	"encoding/json"
	"hash"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Some senders verify an endpoint before they deliver anything to it: Slack
// posts a signed url_verification challenge, Zoom a signed
// endpoint.url_validation, Meta a GET carrying the verify token. A kind
// whose sender does implements Handshaker; the receiver calls it before
// Verify and, when it answers, writes exactly that answer and stores
// nothing.

// HandshakeRequest is what a kind's handshake sees of a request: the
// method, the query, the headers, the raw body (already bounded by the
// receiver) and the receiver's clock.
type HandshakeRequest struct {
	Method string
	Query  url.Values
	Header http.Header
	Body   []byte
	Now    time.Time
}

// HandshakeAnswer is the 200 answer the sender requires: its content type
// and body, written as they are.
type HandshakeAnswer struct {
	ContentType string
	Body        []byte
}

// Handshaker is implemented by the verifiers of kinds whose sender verifies
// the endpoint. Handshake returns:
//   - ok false and no error when the request is not a handshake: the
//     receiver goes on to Verify it as a delivery (a GET is then refused);
//   - an *inbox.Error when it is a handshake that is not authenticated
//     (a signature or verify token that does not match: the receiver gives
//     its one answer to unauthenticated requests) or, authenticated, not
//     well formed (a challenge that is no token);
//   - ok true and the answer when it is an authenticated handshake.
//
// It must authenticate the request before it answers, compare in constant
// time, and answer only text it has checked (handshakeToken).
type Handshaker interface {
	Handshake(r HandshakeRequest) (HandshakeAnswer, bool, error)
}

// Handshakes reports whether the source's kind answers handshakes.
func (s *Source) Handshakes() bool {
	_, ok := s.Verifier.(Handshaker)
	return ok
}

// Handshake answers r when it is a handshake of the source's kind (see
// Handshaker); a kind without handshakes answers nothing (ok false).
func (s *Source) Handshake(r HandshakeRequest) (HandshakeAnswer, bool, error) {
	hs, ok := s.Verifier.(Handshaker)
	if !ok {
		return HandshakeAnswer{}, false, nil
	}
	return hs.Handshake(r)
}

// maxHandshakeToken bounds the challenge a handshake answer repeats.
// Slack's challenges are about 50 characters, Zoom's plain tokens 22,
// Meta's challenges a number.
const maxHandshakeToken = 256

// handshakeToken reports whether a challenge may be repeated in an answer:
// 1 to maxHandshakeToken characters of letters, digits and
// "-._~+/=" (the base64, base64url and decimal alphabets every sender
// uses). Anything else (markup, quotes, control characters) is refused,
// so even an authenticated sender's text never reaches an answer
// unchecked.
func handshakeToken(s string) bool {
	if s == "" || len(s) > maxHandshakeToken {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=':
		default:
			return false
		}
	}
	return true
}

// jsonAnswer is a handshake answer with a JSON body.
func jsonAnswer(v any) HandshakeAnswer {
	b, _ := json.Marshal(v) // maps of checked strings only
	return HandshakeAnswer{ContentType: "application/json", Body: b}
}

// matchIndex is matchAny that also says which key matched (-1 for none),
// for a handshake whose answer is keyed with the secret the sender used.
// Every key is tried and compared whatever the outcome.
func matchIndex(keys [][]byte, newHash func() hash.Hash, sig []byte, write func(io.Writer)) int {
	found := -1
	for i, key := range keys {
		if hmac.Equal(computeMAC(key, newHash, write), sig) && found < 0 {
			found = i
		}
	}
	return found
}
