// Package rdsca holds the certificate authorities that sign the server
// certificates of Amazon RDS, Aurora and RDS Proxy, embedded in the
// binary, so that a Lambda (which has no file of ours to point
// sslrootcert at) can check the database's certificate and host name
// (sslmode=verify-full). README.md in this folder says where bundle.pem
// comes from and how to renew it.
package rdsca

import (
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"fmt"
	"sync"
)

// bundlePEM is every RDS root CA still valid when the bundle was made
// (three per region: RSA2048, RSA4096 and ECC384 G1) and the roots of
// Amazon Trust Services that RDS Proxy's certificates chain to.
//
//go:embed bundle.pem
var bundlePEM []byte

// Certificates parses the embedded bundle.
func Certificates() ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := bundlePEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("rdsca: a %q block in the bundle", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("rdsca: certificate %d of the bundle: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
}

// Pool returns the roots a database's certificate is checked against
// when its connection names none (no sslrootcert): the machine's own
// trusted roots, where it has them (a server with a publicly trusted
// certificate), plus the embedded bundle. It is built once; callers must
// not change it.
var Pool = sync.OnceValue(func() *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	certs, err := Certificates()
	if err != nil {
		// The bundle is part of the binary and its test parses it.
		panic(err)
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool
})
