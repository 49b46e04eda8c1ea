package console

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// The console's guards in front of its sessions: the Host a request names
// (DNS rebinding), and how many wrong tokens an address may try.

// checkHost refuses a request whose Host is not one the console answers
// to: an IP address (loopback, or the one --addr listens on: a literal
// address is its own origin and cannot be rebound), localhost, or a name
// of Config.Hosts. A page on attacker.example whose name the attacker
// rebinds to 127.0.0.1 reaches the console with Host attacker.example,
// and is refused before any session or token is looked at.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			s.fail(w, r, inbox.Errorf(inbox.CauseMisdirectedRequest,
				"webhookctl console: this Host is not the console's address: open it as http://127.0.0.1:PORT/ or http://localhost:PORT/ (or a name given with --host)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"))
	if name == "" {
		return false
	}
	if net.ParseIP(name) != nil || name == "localhost" {
		return true
	}
	_, ok := s.hosts[name]
	return ok
}

// validHostName reports whether name can be a Host's name: letters,
// digits, dots and hyphens.
func validHostName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// TokenAttempts is how many wrong tokens one remote address may send in a
// burst; it regains one each TokenAttemptEvery. Past them every token from
// there, the right one included, is answered 429 with Retry-After: a
// 43-character token is out of reach of guessing anyway, and a chosen one
// of 32 characters stays so at one guess a second.
const (
	TokenAttempts     = 5
	TokenAttemptEvery = time.Second
)

// maxLimitedAddrs bounds the addresses whose attempts are counted; past
// it, new addresses share one count (the console serves loopback: one
// address in practice).
const maxLimitedAddrs = 1024

// attempts is a token bucket per remote address.
type attempts struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	left float64
	at   time.Time
}

func newAttempts(now func() time.Time) *attempts {
	return &attempts{now: now, buckets: map[string]*bucket{}}
}

// remoteKey is the address a request's attempts are counted under: its
// IP, without the port (each connection has its own).
func remoteKey(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// refill brings b up to now.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.left = min(TokenAttempts, b.left+d.Seconds()/TokenAttemptEvery.Seconds())
		b.at = now
	}
}

// bucketOf is key's bucket, brought up to now (a full new one when key
// has none); past maxLimitedAddrs, a new address counts in a shared one.
// a.mu is held.
func (a *attempts) bucketOf(key string, now time.Time) *bucket {
	if b, ok := a.buckets[key]; ok {
		b.refill(now)
		return b
	}
	if len(a.buckets) >= maxLimitedAddrs {
		for k, b := range a.buckets {
			if b.refill(now); b.left >= TokenAttempts {
				delete(a.buckets, k)
			}
		}
	}
	if len(a.buckets) >= maxLimitedAddrs {
		key = "(overflow)"
	}
	b, ok := a.buckets[key]
	if !ok {
		b = &bucket{left: TokenAttempts, at: now}
		a.buckets[key] = b
	}
	b.refill(now)
	return b
}

// wait reports how long key must wait before its next attempt (0: it may
// try now).
func (a *attempts) wait(key string) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.bucketOf(key, a.now())
	if b.left >= 1 {
		return 0
	}
	return time.Duration((1 - b.left) * float64(TokenAttemptEvery))
}

// failed counts a wrong token from key.
func (a *attempts) failed(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.bucketOf(key, a.now())
	b.left = max(0, b.left-1)
}

// tooManyAttempts answers a token from an address past its attempts.
func (s *Server) tooManyAttempts(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.fail(w, r, inbox.Errorf(inbox.CauseTooManyAttempts,
		"webhookctl console: too many wrong tokens from this address: try again in %s", fmt.Sprint(time.Duration(secs)*time.Second)))
}
