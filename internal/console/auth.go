package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The console's sessions and the checks of its actions.

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

// notSignedIn is the refusal of a request without a session: it says how
// to get one, and nothing of the console.
const notSignedIn = "webhookctl console: open the address `webhookctl console` printed at start (its ?code= signs in once, for 10 minutes; ?token= with the console's token at any time)"

// authenticate lets through requests with a valid session cookie; a GET
// with ?code= (a one-time sign-in code, unused and unexpired) or ?token=
// (the right one) starts a session and redirects to the same page without
// either, so the page's address holds neither. The address first opened
// stays in the browser's history: a code's is useless once used. Anything
// else is refused (unauthenticated).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		tok, code := q.Get("token"), q.Get("code")
		if (tok != "" || code != "") && r.Method == http.MethodGet {
			// An address past its wrong tokens is refused before the
			// comparison, the right token included: no answer tells.
			addr := remoteKey(r)
			if wait := s.attempts.wait(addr); wait > 0 {
				s.tooManyAttempts(w, r, wait)
				return
			}
			// A one-time code (the address webhookctl console prints), or
			// the token itself.
			ok := false
			if code != "" {
				ok = s.codes.use(code)
			} else {
				ok = subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
			}
			if !ok {
				s.attempts.failed(addr)
				s.fail(w, r, inbox.WrapError(inbox.CauseUnauthenticated, errors.New("wrong token or sign-in code"), notSignedIn))
				return
			}
			sid := NewToken()
			http.SetCookie(w, &http.Cookie{
				Name: sessionCookie(r), Value: sid + "." + s.sign("session", sid), Path: "/",
				HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
			})
			q.Del("token")
			q.Del("code")
			// One leading slash: "//host" would leave for another site.
			u := url.URL{Path: "/" + strings.TrimLeft(r.URL.Path, "/\\"), RawQuery: q.Encode()}
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		sid, ok := s.session(r)
		if !ok {
			s.fail(w, r, inbox.WrapError(inbox.CauseUnauthenticated, errors.New("no session"), notSignedIn))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sid)))
	})
}

type sessionKey struct{}

// signedIn reports whether r passed authenticate (its session is in its
// context).
func signedIn(r *http.Request) bool {
	_, ok := r.Context().Value(sessionKey{}).(string)
	return ok
}

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

// maxFormBytes bounds an action's form.
const maxFormBytes = 64 << 10

// action serves a state-changing page: refused when the console is
// read-only, or without the session's CSRF token (the cross-origin check
// ran before, New). The page's context carries the operator the action is
// done by.
func (s *Server) action(p page) http.HandlerFunc {
	return s.serve(func(w http.ResponseWriter, r *http.Request) error {
		if s.readOnly != "" {
			return inbox.Errorf(inbox.CauseReadOnly, "%s", s.readOnly)
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return inbox.WrapError(inbox.CausePayloadTooLarge, err, "the form is too large")
			}
			return inbox.WrapError(inbox.CauseInvalidRequest, err, "the form could not be read")
		}
		got := r.PostForm.Get(csrfField)
		if got == "" || !hmac.Equal([]byte(got), []byte(s.csrfToken(r))) {
			return inbox.Errorf(inbox.CauseForbidden, "missing or wrong CSRF token: reload the page")
		}
		return p(w, r.WithContext(operations.WithOperator(r.Context(), s.cfg.Operator)))
	})
}
