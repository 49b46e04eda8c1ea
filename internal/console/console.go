// Package console is webhookctl's operator console: server-rendered pages
// (html/template, an embedded style sheet, no script) over the one
// operations API (shared/operations), as River UI serves a queue. It shows
// the backlog, the events (filtered, paginated, each with its body and
// attempt history), the dead letters, the quarantine and the operator
// actions, and it requeues or resolves dead letters, replays or discards
// events, expunges one, and re-ingests or purges quarantined deliveries,
// each after a confirmation, recorded under who the API says the
// operator is.
//
// The console decides nothing the API decides: windows, pages, counts,
// formats and the status of every error (operatorapi.StatusOf) come from
// shared/operations and shared/operatorapi, so a page says what
// `webhookctl` and the operator function say. The same pages run over an
// operations.Service on the database or over the operator function's
// client.
//
// It is served on a loopback address by `webhookctl console` and never by
// the template. Every request needs the access token: given once as
// ?token=, it becomes a signed session cookie (HttpOnly, SameSite=Strict).
// Every action is a POST checked three ways: the browser's Sec-Fetch-Site
// or Origin must be this origin (http.CrossOriginProtection), the form
// must carry the session's CSRF token, and a read-only console refuses it.
package console

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// EnvToken is the console's access token when --token does not give one;
// without either, a random one is made at start.
const EnvToken = "WEBHOOKCTL_CONSOLE_TOKEN"

// MinTokenLength is the shortest token accepted: a configured token is a
// password to the operator's rights. 32 characters carry at least 128 bits
// of entropy when each is a random hex digit (4 bits), the poorest
// alphabet a generator uses; the console's own (NewToken) are 43
// characters of base64url, 256 bits.
const MinTokenLength = 32

// DefaultWindow is the window of the overview's charts and of the
// refusals: the operations API's.
const DefaultWindow = operations.DefaultWindow

// Config is what the console serves and how.
type Config struct {
	// API is what every page reads and every action goes through: an
	// operations.Service on the database (webhookctl's direct mode), or a
	// client of the operator function. Required.
	API operations.API
	// Identity is who the API says the operator is (API.Whoami, which
	// `webhookctl console` calls at start): the layout shows whom actions
	// are recorded as, and an Access of read makes the console read-only.
	// Nil: the declared Operator, acting unless ReadOnly.
	Identity *operations.Identity
	// Operator is who performs the actions as the operator declared it
	// (webhookctl's --actor, $WEBHOOKCTL_ACTOR, else user@host): every
	// action's request carries it (operations.WithOperator). A remote API
	// ignores it and records the verified AWS principal instead. When
	// empty, the Identity's; required unless the console is read-only.
	Operator operations.Operator
	// Reason is recorded with every action (webhookctl's --reason).
	Reason string
	// Token is the access token (at least MinTokenLength characters).
	Token string
	// ReadOnly hides the actions and refuses them.
	ReadOnly bool
	// Window is the window of the overview's charts and of the refusals
	// (DefaultWindow; at most operations.MaxWindow).
	Window operations.Span
	// Hosts are the names, besides IP addresses and localhost, that a
	// request's Host may give (webhookctl console's --host: a name of
	// this machine the console is opened by). Any other Host is refused
	// (DNS rebinding).
	Hosts []string
	// Now is the clock of the wrong tokens' rate limit; nil is time.Now.
	Now func() time.Time
	// Logger logs every refused or failed request and each action (never
	// a body or the token).
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
	api   operations.API
	log   *slog.Logger
	pages *pages
	// readOnly, when not empty, is why the console may not act: it hides
	// the actions and refuses them with this text.
	readOnly string
	// who is the name actions are recorded under, as the layout shows it;
	// verified: AWS IAM established it.
	who      string
	verified bool
	// key signs the session cookies and derives their CSRF tokens; it
	// lives as long as the process, so a restart logs every browser out.
	key     []byte
	handler http.Handler
	// hosts are Config.Hosts, lower case; attempts counts wrong tokens.
	hosts    map[string]struct{}
	attempts *attempts
	// codes are the one-time sign-in codes (SignInCode).
	codes *codes
}

// New checks cfg and returns the console.
func New(cfg Config) (*Server, error) {
	if cfg.API == nil {
		return nil, errors.New("console: API is required")
	}
	if len(cfg.Token) < MinTokenLength {
		return nil, fmt.Errorf("console: the token must be at least %d characters", MinTokenLength)
	}
	switch {
	case cfg.Window == 0:
		cfg.Window = DefaultWindow
	case cfg.Window < 0 || cfg.Window > operations.MaxWindow:
		return nil, fmt.Errorf("console: the window must be positive and at most %s, got %s", operations.MaxWindow, cfg.Window)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, api: cfg.API, log: cfg.Logger, key: make([]byte, 32), hosts: map[string]struct{}{}, attempts: newAttempts(cfg.Now), codes: newCodes(cfg.Now)}
	for _, h := range cfg.Hosts {
		name := strings.ToLower(strings.TrimSpace(h))
		if !validHostName(name) {
			return nil, fmt.Errorf("console: %q is not a host name (letters, digits, dots and hyphens, no port)", h)
		}
		s.hosts[name] = struct{}{}
	}
	id := cfg.Identity
	if strings.TrimSpace(cfg.Operator.Name) == "" && id != nil {
		s.cfg.Operator = operations.Operator{Name: id.Operator, Verified: id.Verified}
	}
	s.who, s.verified = s.cfg.Operator.Name, s.cfg.Operator.Verified
	if id != nil && id.Operator != "" {
		// What the API records, which a remote API decides.
		s.who, s.verified = id.Operator, id.Verified
	}
	switch {
	case cfg.ReadOnly:
		s.readOnly = "the console is read-only (--read-only)"
	case id != nil && id.Access != operations.AccessAct:
		s.readOnly = fmt.Sprintf("the console is read-only: the operations API lets %s only read (access %q)",
			inbox.EscapeControls(cmp.Or(id.Operator, "this operator"), ""), id.Access)
	case strings.TrimSpace(s.cfg.Operator.Name) == "":
		return nil, errors.New("console: an Operator is required unless the console is read-only")
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = p
	rand.Read(s.key)

	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.FileServerFS(staticFS))
	mux.HandleFunc("GET /{$}", s.serve(s.overview))
	mux.HandleFunc("GET /refusals", s.serve(s.refusals))
	mux.HandleFunc("GET /events", s.serve(s.events))
	mux.HandleFunc("GET /events/{id}", s.serve(s.event))
	mux.HandleFunc("POST /events/replay", s.action(s.replay))
	mux.HandleFunc("POST /events/{id}/expunge", s.action(s.expunge))
	mux.HandleFunc("POST /events/discard", s.action(s.discard))
	mux.HandleFunc("GET /dead-letters", s.serve(s.deadLetters))
	mux.HandleFunc("POST /dead-letters/requeue", s.action(s.requeue))
	mux.HandleFunc("POST /dead-letters/resolve", s.action(s.resolve))
	mux.HandleFunc("GET /actions", s.serve(s.actions))
	mux.HandleFunc("POST /pauses/pause", s.action(s.pause))
	mux.HandleFunc("POST /pauses/resume", s.action(s.resume))
	mux.HandleFunc("GET /quarantine", s.serve(s.quarantine))
	mux.HandleFunc("GET /quarantine/{id}", s.serve(s.quarantined))
	mux.HandleFunc("POST /quarantine/reingest", s.action(s.reingest))
	mux.HandleFunc("POST /quarantine/purge", s.action(s.purge))

	// Cross-origin POSTs are refused before the session is looked at:
	// Sec-Fetch-Site, else Origin against Host (the standard library's).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, inbox.Errorf(inbox.CauseForbidden, "cross-origin request refused"))
	}))
	s.handler = securityHeaders(s.checkHost(cop.Handler(s.authenticate(mux))))
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
