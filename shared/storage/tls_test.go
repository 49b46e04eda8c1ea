package storage_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/pgtest"
	"github.com/webhook-inbox/webhook-inbox/internal/testkit/tier"
	"github.com/webhook-inbox/webhook-inbox/shared/rdsca"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// TestSSLModePolicy: DATABASE_SSLMODE (default verify-full) is the
// floor; a URL asking for less fails at start-up, naming the setting that
// would accept it and never quoting the URL; a URL asking for nothing gets
// the floor. Loopback servers reached with an explicit sslmode=disable and
// Unix sockets are the local exceptions.
func TestSSLModePolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, sslmode string
		want         []string // nil: accepted
	}{
		{"postgres://u:hunter2@db.example.internal/x", "", nil},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=verify-full", "", nil},
		{"postgres://u:p%40ss@db.example.internal/x?", "", nil},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=require", "", []string{"DATABASE_URL: the connection asks for sslmode=require", "DATABASE_SSLMODE (default verify-full)", "set DATABASE_SSLMODE=require"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=require", "require", nil},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=verify-ca", "", []string{"sslmode=verify-ca", "set DATABASE_SSLMODE=verify-ca"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=verify-ca", "verify-ca", nil},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=disable", "", []string{"sslmode=disable", "plaintext", "set DATABASE_SSLMODE=disable"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=disable", "require", []string{"DATABASE_SSLMODE=require accepts nothing weaker than require", "set DATABASE_SSLMODE=disable"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=prefer", "require", []string{"sslmode=prefer", "set DATABASE_SSLMODE=disable"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=allow", "verify-ca", []string{"sslmode=allow", "set DATABASE_SSLMODE=disable"}},
		{"postgres://u:hunter2@db.example.internal/x?sslmode=prefer", "disable", nil},
		{"postgres://u:hunter2@a.example:5432,b.example:5433/x?sslmode=prefer", "", []string{"sslmode=prefer"}},
		// keyword=value strings follow the same rule.
		{"host=db.example.internal user=u password=hunter2 sslmode=require", "", []string{"sslmode=require", "set DATABASE_SSLMODE=require"}},
		{"host=db.example.internal user=u password=hunter2", "", nil},
		// The local exceptions: a loopback server reached with an
		// explicit sslmode=disable (the dev stack's and the tests'), and
		// a Unix socket, over which no TLS is used.
		{"postgres://postgres@127.0.0.1:5432/x?sslmode=disable", "", nil},
		{"postgres://postgres@[::1]:5432/x?sslmode=disable", "", nil},
		{"postgres://postgres@localhost/x?sslmode=disable", "", nil},
		{"host=/var/run/postgresql dbname=x", "", nil},
		{"postgres://postgres@127.0.0.1:5432/x?sslmode=prefer", "", []string{"sslmode=prefer"}},
		{"postgres://postgres@127.0.0.1:5432/x?sslmode=require", "", []string{"sslmode=require"}},
		{"postgres://postgres@127.0.0.1:5432,db.example.internal:5432/x?sslmode=disable", "", []string{"sslmode=disable"}},
		{"postgres://u:hunter2@db.example.internal/x", "prefer", []string{`DATABASE_SSLMODE must be one of disable, require, verify-ca, verify-full; got "prefer"`}},
	}
	for _, c := range cases {
		t.Run(c.url+" under "+c.sslmode, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": c.url, "DATABASE_SSLMODE": c.sslmode}
			cfg, err := storage.PoolConfigFromEnv(func(k string) string { return env[k] })
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// Open agrees, and dials nothing.
				pool, err := cfg.Open(context.Background())
				if err != nil {
					t.Fatalf("Open refused: %v", err)
				}
				pool.Close()
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes the password:\n%v", err)
			}
			// Open refuses as well, for a configuration built by hand.
			if cfg.SSLMode == "prefer" {
				return
			}
			var tlsErr *storage.TLSError
			if _, err := cfg.Open(context.Background()); !errors.As(err, &tlsErr) {
				t.Errorf("Open: %v, want a *storage.TLSError", err)
			}
		})
	}
}

// TestNoPlaintextFallback: the pool's effective configuration, every host
// and every fallback pgx would try, uses TLS that checks the certificate
// against the embedded RDS roots and the host name; pgx's own default
// (prefer, or PGSSLMODE) never applies.
func TestNoPlaintextFallback(t *testing.T) {
	t.Setenv("PGSSLMODE", "disable") // what pgx would use for a URL naming none
	for _, u := range []string{
		"postgres://u@a.example.internal:5432,b.example.internal:5433/x",
		"postgres://u@a.example.internal:5432,b.example.internal:5433/x?sslmode=verify-full",
		"host=a.example.internal,b.example.internal port=5432,5433 user=u",
	} {
		pool, err := storage.PoolConfig{URL: u}.Open(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		cc := pool.Config().ConnConfig
		targets := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig}}, cc.Fallbacks...)
		if len(targets) != 2 {
			t.Errorf("%s: %d hosts to try, want 2 (one each, none without TLS)", u, len(targets))
		}
		for _, f := range targets {
			if f.TLSConfig == nil {
				t.Fatalf("%s: %s:%d would be tried without TLS", u, f.Host, f.Port)
			}
			if f.TLSConfig.InsecureSkipVerify || f.TLSConfig.ServerName != f.Host || f.TLSConfig.RootCAs != rdsca.Pool() {
				t.Errorf("%s: %s:%d: InsecureSkipVerify %v, ServerName %q, RDS roots %v: want a verified certificate naming the host",
					u, f.Host, f.Port, f.TLSConfig.InsecureSkipVerify, f.TLSConfig.ServerName, f.TLSConfig.RootCAs == rdsca.Pool())
			}
		}
		pool.Close()
	}
	// A URL's own roots (sslrootcert) are kept.
	pool, err := storage.PoolConfig{URL: "postgres://u@db.example.internal/x?sslrootcert=system"}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if tc := pool.Config().ConnConfig.TLSConfig; tc == nil || tc.RootCAs == nil || tc.RootCAs == rdsca.Pool() {
		t.Error("sslrootcert=system: the URL's roots were replaced")
	}
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM, for sslrootcert
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook-inbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, file: file}
}

// server issues a server certificate for the names given (DNS names or
// IP addresses).
func (ca *testCA) server(t *testing.T, names ...string) localpg.ServerCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return localpg.ServerCert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// tlsFixture is a server offering TLS with a certificate for localhost
// alone, signed by a CA of the test's own, and the tests' plain server.
type tlsFixture struct {
	ca    *testCA
	port  int    // the TLS server's
	plain string // a database on a server without TLS, its URL without sslmode
}

func setupTLS(t *testing.T) *tlsFixture {
	t.Helper()
	ca := newCA(t)
	c := pgtest.Cluster(t, pgtest.TLS(ca.server(t, "localhost")))
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = ""
	return &tlsFixture{ca: ca, port: c.Port(), plain: u.String()}
}

// url names the TLS server's postgres database through host, with query.
func (f *tlsFixture) url(host, query string) string {
	return "postgres://postgres@" + net.JoinHostPort(host, strconv.Itoa(f.port)) + "/postgres?" + query
}

// connect opens a pool as cfg says and runs a query, returning whether the
// session uses TLS.
func connect(cfg storage.PoolConfig) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.ConnectTimeout = 10 * time.Second
	pool, err := cfg.Open(ctx)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	return sessionSSL(ctx, pool)
}

func sessionSSL(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var ssl bool
	err := pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
	return ssl, err
}

// TestTLSAgainstARealServer: against PostgreSQL with ssl=on, verify-full
// connects when the certificate is signed by a CA the connection trusts
// and names the host; the default roots (the embedded RDS bundle and the
// machine's) refuse the test's CA; a host name the certificate does not
// name is refused; a server without TLS is refused rather than used in
// plaintext, even when it is one of several hosts; and only
// DATABASE_SSLMODE lets sslmode=require through.
func TestTLSAgainstARealServer(t *testing.T) {
	tier.Heavy(t, "starts a cluster of its own")
	t.Parallel()
	f := setupTLS(t)
	root := "sslrootcert=" + url.QueryEscape(f.ca.file)

	// The right CA, the right name: connected, over TLS.
	ssl, err := connect(storage.PoolConfig{URL: f.url("localhost", root)})
	if err != nil || !ssl {
		t.Fatalf("verify-full (the default) with the server's CA: ssl=%v, %v", ssl, err)
	}

	// The default roots do not hold the test's CA.
	var unknown x509.UnknownAuthorityError
	if _, err := connect(storage.PoolConfig{URL: f.url("localhost", "")}); !errors.As(err, &unknown) {
		t.Errorf("with the embedded RDS roots: %v, want x509.UnknownAuthorityError", err)
	}

	// The certificate names localhost, not 127.0.0.1.
	var mismatch x509.HostnameError
	if _, err := connect(storage.PoolConfig{URL: f.url("127.0.0.1", root)}); !errors.As(err, &mismatch) {
		t.Errorf("a host the certificate does not name: %v, want x509.HostnameError", err)
	}
	// verify-ca checks the chain but not the name, when allowed...
	if ssl, err := connect(storage.PoolConfig{URL: f.url("127.0.0.1", root+"&sslmode=verify-ca"), SSLMode: "verify-ca"}); err != nil || !ssl {
		t.Errorf("verify-ca allowed, the server's CA: ssl=%v, %v", ssl, err)
	}
	// ...and with the default roots it refuses the test's CA too.
	if _, err := connect(storage.PoolConfig{URL: f.url("127.0.0.1", "sslmode=verify-ca"), SSLMode: "verify-ca"}); !errors.As(err, &unknown) {
		t.Errorf("verify-ca with the embedded RDS roots: %v, want x509.UnknownAuthorityError", err)
	}

	// require is refused before dialing unless DATABASE_SSLMODE says so.
	var weak *storage.TLSError
	if _, err := connect(storage.PoolConfig{URL: f.url("127.0.0.1", "sslmode=require")}); !errors.As(err, &weak) {
		t.Errorf("sslmode=require by default: %v, want a *storage.TLSError", err)
	}
	if ssl, err := connect(storage.PoolConfig{URL: f.url("127.0.0.1", "sslmode=require"), SSLMode: "require"}); err != nil || !ssl {
		t.Errorf("sslmode=require with DATABASE_SSLMODE=require: ssl=%v, %v", ssl, err)
	}

	// A server without TLS is refused, not used in plaintext.
	if _, err := connect(storage.PoolConfig{URL: f.plain}); err == nil || !strings.Contains(err.Error(), "server refused TLS connection") {
		t.Errorf("a server without TLS: %v, want it refused", err)
	}
	if _, err := connect(storage.PoolConfig{URL: f.plain + "?sslmode=prefer", SSLMode: "require"}); !errors.As(err, &weak) {
		t.Errorf("prefer, which falls back to plaintext: %v, want a *storage.TLSError", err)
	}
	// Of two hosts, the one without TLS is skipped, and the session is
	// the TLS server's.
	plain, err := url.Parse(f.plain)
	if err != nil {
		t.Fatal(err)
	}
	both := "postgres://postgres@" + plain.Host + ",localhost:" + strconv.Itoa(f.port) + "/postgres?" + root
	if ssl, err := connect(storage.PoolConfig{URL: both}); err != nil || !ssl {
		t.Errorf("a plain host then a TLS one: ssl=%v, %v, want the TLS one", ssl, err)
	}

	// The tests' own URLs (a loopback server, sslmode=disable) still work.
	if ssl, err := connect(storage.PoolConfig{URL: f.plain + "?sslmode=disable"}); err != nil || ssl {
		t.Errorf("a loopback server with sslmode=disable: ssl=%v, %v", ssl, err)
	}
}
