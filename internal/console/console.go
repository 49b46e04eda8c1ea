// Package console is webhookctl's operator console: server-rendered pages
// (html/template, an embedded style sheet, no script) over the database
// with the operator's own credentials, as River UI serves a queue. It shows
// the backlog, the events (filtered, paginated, each with its body and
// attempt history), the dead letters, and the operator actions, and it
// requeues dead letters, replays events and expunges one, each after a
// confirmation, recording who did it.
//
// It is served on a loopback address by `webhookctl console` and never by
// the template. Every request needs the access token: given once as
// ?token=, it becomes a signed session cookie (HttpOnly, SameSite=Strict).
// Every action is a POST checked three ways: the browser's Sec-Fetch-Site
// or Origin must be this origin (http.CrossOriginProtection), the form
// must carry the session's CSRF token, and ReadOnly refuses it.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// EnvToken is the console's access token when --token does not give one;
// without either, a random one is made at start.
const EnvToken = "WEBHOOKCTL_CONSOLE_TOKEN"

// MinTokenLength is the shortest token accepted: a configured token is a
// password to the operator's database rights.
const MinTokenLength = 16

// DefaultWindow is the window of the overview's charts and of the
// refusals.
const DefaultWindow = 24 * time.Hour

// Config is what the console serves and how.
type Config struct {
	// Store is the database, opened with the operator's credentials.
	Store *storage.Store
	// Archiver opens the archive's reader for the body of an archived
	// event (as `webhookctl events show` reads it); nil when the archive's
	// settings are not given: the event page then says so.
	Archiver func(ctx context.Context) (*archive.Archiver, error)
	// Token is the access token (at least MinTokenLength characters).
	Token string
	// ReadOnly hides the actions and refuses them.
	ReadOnly bool
	// Actor is who the actions are recorded as (webhookctl's --actor,
	// $WEBHOOKCTL_ACTOR, else user@host); required unless ReadOnly.
	Actor inbox.Actor
	// Window is the window of the overview's charts and of the refusals
	// (DefaultWindow).
	Window time.Duration
	// ArchiveMinAge is the archiver's ARCHIVE_MIN_AGE: the overview counts
	// the events processed before it and not archived as due
	// (archive.DefaultMinAge when zero).
	ArchiveMinAge time.Duration
	// Logger logs each action (never a body or the token).
	Logger *slog.Logger
}

// TokenFromEnv returns flag, else $WEBHOOKCTL_CONSOLE_TOKEN, else a new
// random token (generated reports which), refusing a short one.
func TokenFromEnv(flag string, getenv func(string) string) (token string, generated bool, err error) {
	token = strings.TrimSpace(flag)
	if token == "" {
		token = strings.TrimSpace(getenv(EnvToken))
	}
	if token == "" {
		return NewToken(), true, nil
	}
	if len(token) < MinTokenLength {
		return "", false, fmt.Errorf("the console's token (--token or %s) must be at least %d characters", EnvToken, MinTokenLength)
	}
	return token, false, nil
}

// NewToken returns a random access token: 32 bytes, base64url.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails; see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b)
}

// Server is the console's http.Handler.
type Server struct {
	cfg   Config
	log   *slog.Logger
	pages *pages
	// key signs the session cookies and derives their CSRF tokens; it
	// lives as long as the process, so a restart logs every browser out.
	key     []byte
	handler http.Handler
}

// sessionCookie names the cookie that holds the session (its id and the
// id's signature). Browsers share a host's cookies among its ports, so the
// name carries the port: two consoles (one per environment, say) keep
// their own sessions.
func sessionCookie(r *http.Request) string {
	_, port, err := net.SplitHostPort(r.Host)
	if err != nil || port == "" {
		port = "80"
	}
	return "webhookctl_console_" + port
}

// New checks cfg and returns the console.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: Store is required")
	}
	if len(cfg.Token) < MinTokenLength {
		return nil, fmt.Errorf("console: the token must be at least %d characters", MinTokenLength)
	}
	if !cfg.ReadOnly && strings.TrimSpace(cfg.Actor.Name) == "" {
		return nil, errors.New("console: an Actor is required unless ReadOnly")
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.ArchiveMinAge <= 0 {
		cfg.ArchiveMinAge = archive.DefaultMinAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, pages: p, key: make([]byte, 32)}
	rand.Read(s.key)

	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.FileServerFS(staticFS))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /refusals", s.refusals)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /events/{id}", s.event)
	mux.HandleFunc("POST /events/replay", s.action(s.replay))
	mux.HandleFunc("POST /events/{id}/expunge", s.action(s.expunge))
	mux.HandleFunc("GET /dead-letters", s.deadLetters)
	mux.HandleFunc("POST /dead-letters/requeue", s.action(s.requeue))
	mux.HandleFunc("GET /actions", s.actions)

	// Cross-origin POSTs are refused before the session is looked at:
	// Sec-Fetch-Site, else Origin against Host (the standard library's).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("console: cross-origin request refused", "method", r.Method, "path", r.URL.Path)
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	s.handler = securityHeaders(cop.Handler(s.authenticate(mux)))
	return s, nil
}

// ServeHTTP serves the console.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// securityHeaders: nothing but this origin's own style sheet loads, no
// page can frame the console, nothing is cached, and no URL leaks in a
// Referer.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// authenticate lets through requests with a valid session cookie; a GET
// with ?token= (the right one) starts a session and redirects to the same
// page without the token, so it stays out of the history. Anything else
// is 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
				s.unauthorized(w, "wrong token")
				return
			}
			sid := NewToken()
			http.SetCookie(w, &http.Cookie{
				Name: sessionCookie(r), Value: sid + "." + s.sign("session", sid), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
			})
			q := r.URL.Query()
			q.Del("token")
			// One leading slash: "//host" would leave for another site.
			u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/\\"), RawQuery: q.Encode()}
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		sid, ok := s.session(r)
		if !ok {
			s.unauthorized(w, "no session")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sid)))
	})
}

type sessionKey struct{}

// session returns the request's session id, if its cookie is signed by
// this process.
func (s *Server) session(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie(r))
	if err != nil {
		return "", false
	}
	sid, sig, ok := strings.Cut(c.Value, ".")
	if !ok || sid == "" || !hmac.Equal([]byte(sig), []byte(s.sign("session", sid))) {
		return "", false
	}
	return sid, true
}

func (s *Server) unauthorized(w http.ResponseWriter, why string) {
	s.log.Warn("console: request refused", "reason", why)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintln(w, "webhookctl console: open the address with ?token= that `webhookctl console` printed at start")
}

// sign is the HMAC of what under the process's key, base64url.
func (s *Server) sign(purpose, what string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose + "\x00" + what))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrfToken is the CSRF token of the request's session.
func (s *Server) csrfToken(r *http.Request) string {
	sid, _ := r.Context().Value(sessionKey{}).(string)
	return s.sign("csrf", sid)
}

// csrfField is the form field that carries it.
const csrfField = "csrf"

// action wraps a state-changing handler: refused when read-only (403), or
// without the session's CSRF token (403). The cross-origin check ran
// before (New).
func (s *Server) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.ReadOnly {
			http.Error(w, "the console is read-only (--read-only)", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		got := r.PostForm.Get(csrfField)
		if got == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(r))) {
			s.log.Warn("console: action without a valid CSRF token refused", "path", r.URL.Path)
			http.Error(w, "missing or wrong CSRF token: reload the page", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}
