package storage

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/rdsca"
)

// EnvDatabaseSSLMode is the weakest TLS a database connection may use,
// and the sslmode of a connection that names none (PoolConfig.SSLMode).
const EnvDatabaseSSLMode = "DATABASE_SSLMODE"

// DefaultSSLMode checks the server's certificate against the embedded
// RDS and RDS Proxy roots and the machine's own (rdsca.Pool), and that it
// names the host connected to.
const DefaultSSLMode = "verify-full"

// SSLModes are DATABASE_SSLMODE's values, weakest first. libpq's allow
// and prefer are not among them: they fall back to plaintext when TLS
// fails, so as a floor they mean disable, which says so.
var SSLModes = []string{"disable", "require", "verify-ca", "verify-full"}

// tlsLevel is how much a connection's TLS proves, as pgx sets it up.
type tlsLevel int

const (
	// plaintext: no TLS, or a fallback without it (allow, prefer).
	plaintext tlsLevel = iota
	// unverified: encrypted, but any certificate is taken (require).
	unverified
	// caOnly: the certificate chains to a trusted root, whatever host it
	// names (verify-ca).
	caOnly
	// full: a trusted certificate naming the host (verify-full).
	full
)

var levelOfMode = map[string]tlsLevel{"disable": plaintext, "require": unverified, "verify-ca": caOnly, "verify-full": full}

// levelOf reads what pgx's sslmode made of one host's TLS configuration.
func levelOf(tc *tls.Config) tlsLevel {
	switch {
	case tc == nil:
		return plaintext
	case !tc.InsecureSkipVerify:
		// crypto/tls checks the chain and ServerName, which pgx sets to
		// the host (verify-full).
		return full
	case tc.VerifyPeerCertificate != nil:
		return caOnly // pgx's own chain check, without the host name
	default:
		return unverified
	}
}

// what says what a level lets through, for the refusal.
var what = map[tlsLevel]string{
	plaintext:  "which may send everything, the password included, in plaintext (disable never uses TLS; allow and prefer fall back to plaintext when TLS fails)",
	unverified: "which encrypts without checking the server's certificate, so anyone on the network path can pose as the database",
	caOnly:     "which checks the server's certificate but not that it names the host connected to",
}

// relaxTo is the DATABASE_SSLMODE that accepts a level.
var relaxTo = map[tlsLevel]string{plaintext: "disable", unverified: "require", caOnly: "verify-ca", full: "verify-full"}

// TLSError is a connection refused before dialing because its TLS is
// weaker than DATABASE_SSLMODE allows. Its text names the sslmode asked
// for and the setting that would accept it, never the URL.
type TLSError struct {
	// SSLMode is the sslmode the connection string gives ("" when it gives
	// none and the weakness is elsewhere).
	SSLMode string
	// Min is DATABASE_SSLMODE, or its default.
	Min   string
	level tlsLevel
}

func (e *TLSError) Error() string {
	asked := "the connection's TLS"
	if e.SSLMode != "" {
		asked = "the connection asks for sslmode=" + e.SSLMode
	}
	floor := EnvDatabaseSSLMode + "=" + e.Min
	if e.Min == DefaultSSLMode {
		floor = EnvDatabaseSSLMode + " (default " + DefaultSSLMode + ")"
	}
	return fmt.Sprintf("%s, %s; %s accepts nothing weaker than %s: connect with sslmode=%s, or set %s=%s to accept it",
		asked, what[e.level], floor, e.Min, e.Min, EnvDatabaseSSLMode, relaxTo[e.level])
}

// CheckSSLMode reports whether mode is a valid DATABASE_SSLMODE ("" is the
// default).
func CheckSSLMode(mode string) error {
	if _, ok := levelOfMode[mode]; ok || mode == "" {
		return nil
	}
	return fmt.Errorf("%s must be one of %s; got %q (allow and prefer fall back to plaintext: say disable to allow plaintext)",
		EnvDatabaseSSLMode, strings.Join(SSLModes, ", "), mode)
}

// CheckTLS reports whether a pool on connString would connect as
// DATABASE_SSLMODE minMode ("" for the default) allows: a *TLSError when it
// would not, without dialing. Open applies the same rule.
func CheckTLS(connString, minMode string) error {
	cs, written, err := withSSLMode(connString, minMode)
	if err != nil {
		return err
	}
	cfg, err := pgconn.ParseConfig(cs)
	if err != nil {
		// pgx's parse errors can echo the string, password included.
		return errors.New("the database connection string is not valid")
	}
	return secureTLS(cfg, minMode, written)
}

// withSSLMode returns connString with sslmode=minMode (or the default) added
// when it names no sslmode, and the sslmode it names. pgx's own default,
// prefer (or PGSSLMODE), is never left to apply.
func withSSLMode(connString, minMode string) (string, string, error) {
	if minMode == "" {
		minMode = DefaultSSLMode
	}
	if err := CheckSSLMode(minMode); err != nil {
		return "", "", err
	}
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", "", errors.New("the database URL is not a valid URL") // url's error quotes it
		}
		if q := u.Query(); q.Has("sslmode") {
			return connString, q.Get("sslmode"), nil
		}
		// Appended to the string as written, so the rest (a password's
		// escapes, a list of hosts) stays byte for byte as it was.
		sep := "?"
		switch {
		case strings.HasSuffix(connString, "?"):
			sep = ""
		case strings.Contains(connString, "?"):
			sep = "&"
		}
		return connString + sep + "sslmode=" + url.QueryEscape(minMode), "", nil
	}
	// keyword=value: the last sslmode wins in pgx, so a missed one only
	// makes the check below see pgx's weaker mode and refuse it.
	if m := keywordSSLMode.FindAllStringSubmatch(connString, -1); m != nil {
		return connString, strings.Trim(m[len(m)-1][1], "'"), nil
	}
	return strings.TrimSpace(connString + " sslmode=" + minMode), "", nil
}

var keywordSSLMode = regexp.MustCompile(`(?:^|\s)sslmode\s*=\s*('[^']*'|\S*)`)

// secureTLS checks every host pgx would try (its first and its
// fallbacks: the other hosts of a list, and prefer's or allow's second try
// without TLS) against DATABASE_SSLMODE minMode, and points each TLS
// configuration that names no roots (no sslrootcert) at rdsca.Pool.
//
// Two kinds of host are let through without TLS whatever minMode says: a Unix
// socket, over which pgx, like libpq, never uses TLS, and a loopback
// address (127.0.0.0/8, ::1, localhost) in a connection that says
// sslmode=disable itself: a server on this machine, as the dev stack's and
// the tests' clusters are, with no network between to authenticate it
// across.
func secureTLS(cfg *pgconn.Config, minMode, written string) error {
	if minMode == "" {
		minMode = DefaultSSLMode
	}
	floor, ok := levelOfMode[minMode]
	if !ok {
		return CheckSSLMode(minMode)
	}
	targets := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	weakest := full
	for _, t := range targets {
		if t.TLSConfig != nil && t.TLSConfig.RootCAs == nil {
			// pgx's verify-ca check reads RootCAs from this very
			// configuration, so setting it here serves both modes.
			t.TLSConfig.RootCAs = rdsca.Pool()
		}
		l := levelOf(t.TLSConfig)
		if l == plaintext && (isSocket(t.Host) || (written == "disable" && isLoopback(t.Host))) {
			continue
		}
		weakest = min(weakest, l)
	}
	if weakest < floor {
		return &TLSError{SSLMode: written, Min: minMode, level: weakest}
	}
	return nil
}

// isSocket reports whether host is a Unix socket folder, as pgx reads it.
func isSocket(host string) bool {
	network, _ := pgconn.NetworkAddress(host, 5432)
	return network == "unix"
}

// isLoopback reports whether host is this machine's loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
