package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// SignInCodeTTL is how long a sign-in code may be used, once.
const SignInCodeTTL = 10 * time.Minute

// maxCodes bounds the codes waiting to be used.
const maxCodes = 64

// codes are one-time sign-in codes: the address webhookctl console prints
// carries one instead of the token, so the address a browser keeps in its
// history, its autocompletion or a Referer signs nobody in once it has
// been used, or ten minutes after it was printed.
type codes struct {
	mu   sync.Mutex
	now  func() time.Time
	left map[[sha256.Size]byte]time.Time // by the code's hash, until when it may be used
}

func newCodes(now func() time.Time) *codes {
	return &codes{now: now, left: map[[sha256.Size]byte]time.Time{}}
}

// mint returns a new code.
func (c *codes) mint() string {
	code := NewToken()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for h, until := range c.left {
		if !now.Before(until) {
			delete(c.left, h)
		}
	}
	if len(c.left) >= maxCodes {
		for h := range c.left { // the map's order is as good as any
			delete(c.left, h)
			break
		}
	}
	c.left[sha256.Sum256([]byte(code))] = now.Add(SignInCodeTTL)
	return code
}

// use reports whether code is a code not used yet and not expired, and
// spends it. The lookup is by the code's hash, and the hash is compared
// in constant time, so the time of a refusal says nothing of the codes.
func (c *codes) use(code string) bool {
	h := sha256.Sum256([]byte(code))
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := false
	for k, until := range c.left {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			ok = c.now().Before(until)
			delete(c.left, k)
		}
	}
	return ok
}

// SignInCode mints a one-time sign-in code: the address
// "/?code=CODE" signs a browser in once, within SignInCodeTTL.
func (s *Server) SignInCode() string { return s.codes.mint() }
