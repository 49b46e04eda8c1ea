package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindStandard is the Standard Webhooks scheme, also sent by Svix under
// svix-* header names: the signature is base64 HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" keyed with the base64-decoded
// "whsec_" secret, sent as space-separated "v1,<base64>" entries.
const KindStandard = "standard"

func init() { register(KindStandard, newStandard) }

// standardOptions is the JSON configuration of a standard source.
type standardOptions struct {
	Kind             string   `json:"kind"`
	Secrets          []string `json:"secrets"`
	ToleranceSeconds *int     `json:"tolerance_seconds"`
	// TypeField is the top-level body field holding the event type;
	// default "type". An explicit "" takes no type, and then the body need
	// not be JSON at all.
	TypeField *string `json:"type_field"`
}

type standardVerifier struct {
	keys      [][]byte
	tol       time.Duration
	typeField string
}

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
	secrets, err := secretList(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	tol, err := toleranceOption(name, o.ToleranceSeconds, DefaultTolerance)
	if err != nil {
		return nil, err
	}
	v := &standardVerifier{tol: tol, typeField: "type"}
	if o.TypeField != nil {
		v.typeField = *o.TypeField
	}
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) == 0 {
			return nil, fieldError(name, "secrets", "secret #%d is not a whsec_-prefixed base64 key", i+1)
		}
		if err := minKeyLength(name, i, len(key), MinStandardSecretBytes); err != nil {
			return nil, err
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
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
	sigs := parseStandardSignatures(sigHeader)
	if len(sigs) == 0 {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the webhook-signature header has no valid v1 signature")
	}
	matched := matchAnyOf(v.keys, sha256.New, sigs, func(w io.Writer) {
		io.WriteString(w, id+"."+tsRaw+".")
		w.Write(body)
	})
	if !matched {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "no v1 signature matches a configured secret")
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

// parseStandardSignatures reads the "v1,<base64>" entries of a
// space-separated signature header (repeated headers are joined first).
// Other versions (v1a, asymmetric) and garbled entries are skipped.
func parseStandardSignatures(header string) [][]byte {
	var sigs [][]byte
	for _, entry := range strings.Fields(strings.ReplaceAll(header, ", v", " v")) {
		version, b64, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) != sha256.Size {
			continue
		}
		sigs = append(sigs, sig)
	}
	return sigs
}

// Sign implements Signer with the Standard Webhooks headers.
func (v *standardVerifier) Sign(body []byte, eventID, _ string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, v.keys[0])
	mac.Write([]byte(eventID + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set("Webhook-Id", eventID)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

// tolerance implements tolerant.
func (v *standardVerifier) tolerance() time.Duration { return v.tol }

// sample implements sampler with a failed invoice payment: the id travels
// in webhook-id (Sign sets it), the type in the source's type_field, which
// takes the place of a field of the same name.
func (v *standardVerifier) sample(now time.Time) (Sample, error) {
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
