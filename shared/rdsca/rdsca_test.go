package rdsca_test

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/rdsca"
)

// The bundle as README.md describes it: its checksum, its 92
// certificates (87 RDS roots, three for each of 29 regions, and the five
// Amazon Trust Services roots of RDS Proxy), every one a CA valid today,
// the earliest to expire named in the log.
func TestBundle(t *testing.T) {
	t.Parallel()
	const wantSHA256 = "42f7345f1c578afed0be88c2ba20e66a8d88a504d5d03994e084cca42ea11a85"
	// The file embedded, read as the build reads it.
	pem, err := os.ReadFile("bundle.pem")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pem)
	if got := hex.EncodeToString(sum[:]); got != wantSHA256 {
		t.Errorf("bundle.pem's SHA-256 is %s, README.md and this test say %s: update both when renewing it", got, wantSHA256)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil || !strings.Contains(string(readme), wantSHA256) {
		t.Errorf("README.md does not give the bundle's SHA-256 %s (%v)", wantSHA256, err)
	}

	certs, err := rdsca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	rds, proxy := 0, map[string]bool{}
	now := time.Now()
	earliest := certs[0]
	for _, c := range certs {
		name := c.Subject.CommonName
		switch {
		case strings.HasPrefix(name, "Amazon RDS ") && strings.HasSuffix(name, " G1"):
			rds++
		case strings.HasPrefix(name, "Amazon Root CA ") || name == "Starfield Services Root Certificate Authority - G2":
			proxy[name] = true
		default:
			t.Errorf("unexpected certificate %q", name)
		}
		if !c.IsCA || !c.BasicConstraintsValid {
			t.Errorf("%s is not a CA", name)
		}
		if now.Before(c.NotBefore) || now.After(c.NotAfter) {
			t.Errorf("%s is valid from %s to %s, not now", name, c.NotBefore, c.NotAfter)
		}
		if c.NotAfter.Before(earliest.NotAfter) {
			earliest = c
		}
	}
	if rds != 87 || len(proxy) != 5 || len(certs) != 92 {
		t.Errorf("%d certificates: %d RDS roots (want 87), %d RDS Proxy roots (want 5: Amazon Root CA 1-4, Starfield Services G2)", len(certs), rds, len(proxy))
	}
	t.Logf("the earliest to expire: %s, on %s", earliest.Subject.CommonName, earliest.NotAfter.Format(time.DateOnly))
	if earliest.NotAfter.Before(now.AddDate(1, 0, 0)) {
		t.Errorf("%s expires on %s, within a year: renew the bundle (README.md)", earliest.Subject.CommonName, earliest.NotAfter.Format(time.DateOnly))
	}
}

// Pool holds the bundle: each of its certificates verifies against it.
func TestPoolHoldsTheBundle(t *testing.T) {
	t.Parallel()
	certs, err := rdsca.Certificates()
	if err != nil {
		t.Fatal(err)
	}
	pool := rdsca.Pool()
	if rdsca.Pool() != pool {
		t.Error("Pool is built more than once")
	}
	for _, c := range certs {
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s: %v", c.Subject.CommonName, err)
		}
	}
}
