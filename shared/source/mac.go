package source

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Helpers shared by the kinds whose sender puts exactly one MAC in one
// header (github, square, shopify, hmac).

// oneSignature returns the single value of a signature header. Absent or
// blank, the cause is signature_missing; repeated, signature_malformed: two
// values are ambiguous, and a proxy that folds them into "a, b" makes the
// value undecodable, so both transports give the same answer.
func oneSignature(h http.Header, name string) (string, error) {
	vals := h.Values(name)
	if len(vals) == 0 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == "") {
		return "", inbox.Errorf(inbox.CauseSignatureMissing, "the %s header is missing", name)
	}
	if len(vals) > 1 {
		return "", inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header appears %d times; exactly one is accepted", name, len(vals))
	}
	return strings.TrimSpace(vals[0]), nil
}

// Signature encodings.
const (
	encodingHex    = "hex"
	encodingBase64 = "base64"
)

// decodeMAC decodes a signature in the given encoding and checks it has
// the digest's size; anything else is signature_malformed.
func decodeMAC(header, value, encoding string, size int) ([]byte, error) {
	var (
		sig []byte
		err error
	)
	switch encoding {
	case encodingHex:
		sig, err = hex.DecodeString(value)
	default:
		sig, err = base64.StdEncoding.DecodeString(value)
	}
	if err != nil || len(sig) != size {
		return nil, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is not a %s-encoded %d-byte signature", header, encoding, size)
	}
	return sig, nil
}

// encodeMAC is decodeMAC's inverse, for signers.
func encodeMAC(sig []byte, encoding string) string {
	if encoding == encodingHex {
		return hex.EncodeToString(sig)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// matchAny reports whether sig is the MAC of the signed content under any
// of keys. write feeds the signed content (raw body bytes included) to the
// MAC.
func matchAny(keys [][]byte, newHash func() hash.Hash, sig []byte, write func(io.Writer)) bool {
	return matchAnyOf(keys, newHash, [][]byte{sig}, write)
}

// matchAnyOf reports whether any of sigs (a sender may send several during
// its own secret roll) is the MAC of the signed content under any of keys
// (ours, during a rotation). Every pair is compared with hmac.Equal,
// whatever the outcome of the others, so the time taken does not say which
// secret or signature came closest.
func matchAnyOf(keys [][]byte, newHash func() hash.Hash, sigs [][]byte, write func(io.Writer)) bool {
	var matched bool
	for _, key := range keys {
		want := computeMAC(key, newHash, write)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				matched = true
			}
		}
	}
	return matched
}

// computeMAC returns the MAC of the signed content under key.
func computeMAC(key []byte, newHash func() hash.Hash, write func(io.Writer)) []byte {
	mac := hmac.New(newHash, key)
	write(mac)
	return mac.Sum(nil)
}

// rawSecrets returns the configured secrets as HMAC keys, byte for byte, as
// GitHub, Square and Shopify use them; each must be MinSecretBytes long.
func rawSecrets(name string, secrets []string) ([][]byte, error) {
	keys, err := secretBytes(name, secrets)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if err := minKeyLength(name, i, len(k), MinSecretBytes); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// secretBytes returns the configured secrets byte for byte, unchecked.
func secretBytes(name string, secrets []string) ([][]byte, error) {
	list, err := secretList(name, secrets)
	if err != nil {
		return nil, err
	}
	keys := make([][]byte, len(list))
	for i, s := range list {
		keys[i] = []byte(s)
	}
	return keys, nil
}
