package source

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindStandard is the Standard Webhooks scheme, also sent by Svix under
// svix-* header names. The signed content is
// "{webhook-id}.{webhook-timestamp}.{body}", and the webhook-signature
// header holds space-separated entries of two versions:
//   - "v1,<base64>": HMAC-SHA256 keyed with the base64-decoded "whsec_"
//     secret (symmetric; the secrets option);
//   - "v1a,<base64>": an ed25519 signature by the sender's private key,
//     checked with its "whpk_" public key (asymmetric; the public_keys
//     option). The receiver then holds nothing that could sign.
const KindStandard = "standard"

func init() { register(KindStandard, newStandard) }

// standardOptions is the JSON configuration of a standard source.
type standardOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
	// PublicKeys are the sender's ed25519 public keys ("whpk_" + base64 of
	// 32 bytes) that v1a signatures are checked with, newest first. A
	// source needs secrets, public_keys or both.
	PublicKeys []string `json:"public_keys"`
	// SigningKey is an ed25519 private key ("whsk_" + base64 of the 64-byte
	// key pair, or of the 32-byte seed) for development only: it lets
	// `make dev` and `webhookdev send` sign v1a samples for a source that
	// has no secret. Its public key must be in public_keys. A receiver
	// needs no private key, so a source that holds one gets a start-up
	// warning.
	SigningKey       string `json:"signing_key"`
	ToleranceSeconds *int   `json:"tolerance_seconds"`
	// TypeField is the top-level body field holding the event type;
	// default "type". An explicit "" takes no type, and then the body need
	// not be JSON at all.
	TypeField *string `json:"type_field"`
}

type standardVerifier struct {
	keys       [][]byte            // v1: HMAC keys
	publicKeys []ed25519.PublicKey // v1a
	signingKey ed25519.PrivateKey  // v1a, development only; nil for none
	tol        time.Duration
	typeField  string
}

// Standard Webhooks key prefixes.
const (
	standardSecretPrefix     = "whsec_"
	standardPublicKeyPrefix  = "whpk_"
	standardSigningKeyPrefix = "whsk_"
)

// MaxStandardAsymmetricSignatures bounds the v1a entries one delivery may
// carry. Each is checked against each public key over the whole body
// (ed25519 hashes the message for every check), so an unbounded list would
// make one request cost many body hashes. A sender rotating its key sends
// two.
const MaxStandardAsymmetricSignatures = 8

// standardHeaders are the two header sets a sender may use; a request must
// use one set whole, never a mix.
var standardHeaders = [...]struct{ id, timestamp, signature string }{
	{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
	{"Svix-Id", "Svix-Timestamp", "Svix-Signature"},
}

func newStandard(name string, raw json.RawMessage) (kindVerifier, error) {
	var o standardOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	if len(o.Secrets) == 0 && len(o.PublicKeys) == 0 {
		return nil, fieldError(name, "secrets", "at least one secret (whsec_, v1 signatures) or one public key in public_keys (whpk_, v1a signatures) is required")
	}
	tol, err := toleranceOption(name, o.ToleranceSeconds, DefaultTolerance)
	if err != nil {
		return nil, err
	}
	v := &standardVerifier{tol: tol, typeField: "type"}
	if o.TypeField != nil {
		v.typeField = *o.TypeField
	}
	if len(o.Secrets) > 0 {
		secrets, err := secretList(name, o.Secrets)
		if err != nil {
			return nil, err
		}
		for i, s := range secrets {
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, standardSecretPrefix))
			if err != nil || len(key) == 0 {
				return nil, fieldError(name, "secrets", "secret #%d is not a whsec_-prefixed base64 key", i+1)
			}
			if err := minKeyLength(name, i, len(key), MinStandardSecretBytes); err != nil {
				return nil, err
			}
			v.keys = append(v.keys, key)
		}
	}
	for i, s := range o.PublicKeys {
		pk, err := standardPublicKey(s)
		if err != nil {
			return nil, fieldError(name, "public_keys", "public key #%d %s", i+1, err)
		}
		v.publicKeys = append(v.publicKeys, pk)
	}
	if o.SigningKey != "" {
		sk, err := standardSigningKey(o.SigningKey)
		if err != nil {
			return nil, fieldError(name, "signing_key", "%s", err)
		}
		pub := sk.Public().(ed25519.PublicKey)
		listed := false
		for _, pk := range v.publicKeys {
			listed = listed || pk.Equal(pub)
		}
		if !listed {
			return nil, fieldError(name, "signing_key", "its public key %s is not in public_keys: add it there, or nothing it signs would verify", standardPublicKeyPrefix+base64.StdEncoding.EncodeToString(pub))
		}
		v.signingKey = sk
	}
	return v, nil
}

// standardPublicKey decodes a "whpk_" public key (the prefix may be left
// out). The error says what is wrong, never the value: a secret key pasted
// by mistake must not reach a log.
func standardPublicKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil, errors.New("is empty")
	case strings.HasPrefix(s, standardSigningKeyPrefix):
		return nil, errors.New("is a whsk_ private key: configure the sender's whpk_ public key, and keep the private key secret (rotate it if it left the sender)")
	case strings.HasPrefix(s, standardSecretPrefix):
		return nil, errors.New("is a whsec_ secret: it belongs in secrets (v1 signatures)")
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, standardPublicKeyPrefix))
	if err != nil {
		return nil, errors.New("is not whpk_ followed by standard base64")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("decodes to %d bytes; an ed25519 public key is %d", len(b), ed25519.PublicKeySize)
	}
	if smallOrderPoint(b) {
		return nil, errors.New("is a point of small order, under which forged signatures verify: it is not a sender's real key")
	}
	return ed25519.PublicKey(b), nil
}

// standardSigningKey decodes a "whsk_" private key: base64 of the 64-byte
// key pair (seed then public key, as Go's ed25519.PrivateKey and Svix's
// server serialise it) or of the 32-byte seed.
func standardSigningKey(s string) (ed25519.PrivateKey, error) {
	if !strings.HasPrefix(s, standardSigningKeyPrefix) {
		return nil, errors.New("is not a whsk_-prefixed ed25519 private key")
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, standardSigningKeyPrefix))
	if err != nil {
		return nil, errors.New("is not whsk_ followed by standard base64")
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		sk := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !bytes.Equal(sk[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
			return nil, errors.New("is inconsistent: its second half is not the public key of its first")
		}
		return sk, nil
	}
	return nil, fmt.Errorf("decodes to %d bytes; want a %d-byte key pair or a %d-byte seed", len(b), ed25519.PrivateKeySize, ed25519.SeedSize)
}

// fieldP is the field prime of edwards25519, 2^255 - 19.
var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// smallOrderY are the y coordinates of the edwards25519 points of order 1,
// 2, 4 and 8 (the small-order points; each y stands for both signs of x):
// 1 (the identity), p-1, 0, and the pair of order 8 below and p minus it.
var smallOrderY = func() []*big.Int {
	y8, _ := new(big.Int).SetString("5fc536d880238b13933c6d305acdfd5f098eff289f4c345b027b2c28f95e826", 16)
	return []*big.Int{big.NewInt(1), new(big.Int).Sub(fieldP, big.NewInt(1)), big.NewInt(0), y8, new(big.Int).Sub(fieldP, y8)}
}()

// smallOrderPoint reports whether a 32-byte ed25519 public key encodes a
// point of small order, canonically or not (y at or past p). Under such a
// key a signature with S = 0 and a small-order R verifies for many
// messages, whoever made it; crypto/ed25519 does not refuse these keys.
func smallOrderPoint(key []byte) bool {
	le := bytes.Clone(key)
	le[31] &= 0x7f // the top bit is x's sign
	slices.Reverse(le)
	y := new(big.Int).SetBytes(le)
	y.Mod(y, fieldP)
	for _, s := range smallOrderY {
		if y.Cmp(s) == 0 {
			return true
		}
	}
	return false
}

func (v *standardVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	names := standardHeaders[0]
	if h.Get(names.id) == "" && h.Get(names.signature) == "" {
		names = standardHeaders[1]
	}
	sigHeader, ok := headerValue(h, names.signature)
	if !ok || strings.TrimSpace(sigHeader) == "" {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMissing, "the webhook-signature header is missing")
	}
	id, idOK := singleHeader(h, names.id)
	tsRaw, tsOK := singleHeader(h, names.timestamp)
	if !idOK || !tsOK {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "exactly one webhook-id and one webhook-timestamp header are required")
	}
	ts, err := strconv.ParseInt(tsRaw, 10, 64)
	if err != nil || ts <= 0 {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the webhook-timestamp header is not a Unix time")
	}
	sigs, asym := parseStandardSignatures(sigHeader)
	if len(sigs) == 0 && len(asym) == 0 {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the webhook-signature header has no valid v1 or v1a signature")
	}
	if len(asym) > MaxStandardAsymmetricSignatures {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the webhook-signature header has %d v1a signatures; at most %d are checked", len(asym), MaxStandardAsymmetricSignatures)
	}
	var matched bool
	if len(v.keys) > 0 && len(sigs) > 0 {
		matched = matchAnyOf(v.keys, sha256.New, sigs, func(w io.Writer) {
			io.WriteString(w, id+"."+tsRaw+".")
			w.Write(body)
		})
	}
	if len(v.publicKeys) > 0 && len(asym) > 0 {
		// Every pair is checked, whatever the others gave: the public keys
		// are no secret, but the time taken stays independent of which
		// one matched.
		msg := make([]byte, 0, len(id)+len(tsRaw)+2+len(body))
		msg = append(append(append(append(msg, id...), '.'), tsRaw...), '.')
		msg = append(msg, body...)
		for _, pk := range v.publicKeys {
			for _, sig := range asym {
				if ed25519.Verify(pk, msg, sig) {
					matched = true
				}
			}
		}
	}
	if !matched {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "no v1 signature matches a configured secret, nor any v1a signature a configured public key")
	}
	if !withinTolerance(time.Unix(ts, 0), now, v.tol) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseTimestampOutOfTolerance, "the signed timestamp is more than %s away from now", v.tol)
	}
	ident := inbox.Identity{EventID: id}
	if v.typeField != "" {
		f, err := bodyFields(body, v.typeField)
		if err != nil {
			return inbox.Identity{}, err
		}
		ident.EventType = f[v.typeField]
	}
	return checkIdentity(ident)
}

// parseStandardSignatures reads the "v1,<base64>" (HMAC-SHA256) and
// "v1a,<base64>" (ed25519) entries of a space-separated signature header
// (repeated headers are joined first). Other versions and garbled entries
// are skipped: a sender may add versions this receiver does not know.
func parseStandardSignatures(header string) (v1, v1a [][]byte) {
	for _, entry := range strings.Fields(strings.ReplaceAll(header, ", v", " v")) {
		version, b64, ok := strings.Cut(entry, ",")
		if !ok || (version != "v1" && version != "v1a") {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		switch {
		case err != nil:
		case version == "v1" && len(sig) == sha256.Size:
			v1 = append(v1, sig)
		case version == "v1a" && len(sig) == ed25519.SignatureSize:
			v1a = append(v1a, sig)
		}
	}
	return v1, v1a
}

// Sign implements Signer with the Standard Webhooks headers: a v1 entry
// with the newest secret, and a v1a entry with the signing_key, for each
// the source has (a sender in mid-migration sends both).
func (v *standardVerifier) Sign(body []byte, eventID, _ string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	content := append([]byte(eventID+"."+ts+"."), body...)
	var entries []string
	if len(v.keys) > 0 {
		mac := hmac.New(sha256.New, v.keys[0])
		mac.Write(content)
		entries = append(entries, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	if v.signingKey != nil {
		entries = append(entries, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(v.signingKey, content)))
	}
	h := http.Header{}
	h.Set("Webhook-Id", eventID)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", strings.Join(entries, " "))
	return h
}

// headerNames implements headerNamer: both header sets, of which Sign
// writes one.
func (v *standardVerifier) headerNames() []string {
	var out []string
	for _, set := range standardHeaders {
		out = append(out, set.id, set.timestamp, set.signature)
	}
	return out
}

// cannotSign implements signReady: a source with public keys only holds
// nothing to sign with.
func (v *standardVerifier) cannotSign() error {
	if len(v.keys) == 0 && v.signingKey == nil {
		return errors.New("it has only public_keys, which verify but cannot sign: add a signing_key (whsk_, development only) whose public key is in public_keys, or a secret (whsec_)")
	}
	return nil
}

// startWarning implements warner: a receiver needs no private key, and one
// in its configuration can sign anything the source accepts.
func (v *standardVerifier) startWarning() string {
	if v.signingKey == nil {
		return ""
	}
	return "signing_key holds an ed25519 private key, which can sign deliveries this source accepts; a receiver needs only public_keys: keep signing_key to development sources"
}

// tolerance implements tolerant.
func (v *standardVerifier) tolerance() time.Duration { return v.tol }

// makeSample implements sampleMaker with a failed invoice payment: the id travels
// in webhook-id (Sign sets it), the type in the source's type_field, which
// takes the place of a field of the same name.
func (v *standardVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, _ := randomIDs()
	s := Sample{EventID: "msg_dev_" + suffix, Header: http.Header{}}
	var fields []string
	if v.typeField != "" {
		s.EventType = "invoice.payment_failed"
		key, err := json.Marshal(v.typeField)
		if err != nil {
			return Sample{}, fmt.Errorf("type_field: %w", err)
		}
		fields = append(fields, fmt.Sprintf("%s:%q", key, s.EventType))
	}
	if v.typeField != "timestamp" {
		fields = append(fields, fmt.Sprintf(`"timestamp":%q`, now.UTC().Format(time.RFC3339)))
	}
	if v.typeField != "data" {
		fields = append(fields, fmt.Sprintf(`"data":{"invoice":"in_dev_%s","customer":"cus_dev","amount_due":2000}`, suffix))
	}
	s.Body = []byte("{" + strings.Join(fields, ",") + "}")
	return s, nil
}
