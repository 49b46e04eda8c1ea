package source

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindHMAC is the generic scheme for senders without a kind of their own:
// one header carries an HMAC (SHA-256 or SHA-512, hex or base64, behind an
// optional prefix) of a signed content built from a template over the raw
// body and, optionally, a timestamp header and the event id header. Where
// the event id and type come from (a header, or a string at a dotted path
// in a JSON body) is configured too. Everything is checked at start-up.
const KindHMAC = "hmac"

func init() { register(KindHMAC, newHMAC) }

// hmacOptions is the JSON configuration of an hmac source.
type hmacOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
	// SignatureHeader carries the signature (required).
	SignatureHeader string `json:"signature_header"`
	// Algorithm is "sha256" (default) or "sha512".
	Algorithm string `json:"algorithm"`
	// Encoding of the signature: "hex" (default) or "base64".
	Encoding string `json:"encoding"`
	// SignaturePrefix, when set, must start the header's value
	// ("sha256=") and is not part of the encoded signature.
	SignaturePrefix string `json:"signature_prefix"`
	// TimestampHeader, when set, carries a signed Unix time in seconds.
	TimestampHeader string `json:"timestamp_header"`
	// SignedContent is the template of what is signed: {body} (exactly
	// once: the raw bytes), {timestamp} (the timestamp header's value as
	// sent), {id} (the event id header's value as sent) and literal text.
	// Default "{body}"; required with timestamp_header.
	SignedContent *string `json:"signed_content"`
	// ToleranceSeconds bounds the timestamp's distance from now, both ways
	// (default 300); only with timestamp_header.
	ToleranceSeconds *int `json:"tolerance_seconds"`
	// EventID says where the event id is (required).
	EventID *fieldLocation `json:"event_id"`
	// EventType says where the event type is (optional: none by default).
	EventType *fieldLocation `json:"event_type"`
	// AllowUnsignedEventID accepts an event_id header that signed_content
	// does not sign ({id}). Without it such a source is refused: anyone
	// holding one captured delivery could post it under the sender's next
	// id, and the real event would then arrive as a duplicate and be lost.
	AllowUnsignedEventID bool `json:"allow_unsigned_event_id"`
}

// fieldLocation is {"header": "X-Event-Id"} or {"json": "data.id"}.
type fieldLocation struct {
	Header string `json:"header"`
	JSON   string `json:"json"`
}

// location is a checked fieldLocation: a canonical header name, or the keys
// of a JSON path; neither for "not configured".
type location struct {
	header string
	path   []string
}

// Parts of a signed-content template.
type segmentKind int

const (
	segLiteral segmentKind = iota
	segBody
	segTimestamp
	segID
)

type segment struct {
	kind    segmentKind
	literal []byte
}

type hmacVerifier struct {
	keys            [][]byte
	newHash         func() hash.Hash
	size            int
	encoding        string
	signatureHeader string
	prefix          string
	timestampHeader string
	tol             time.Duration
	content         []segment
	signsID         bool
	// idDelim is the byte of signed_content next to {id} on the side of
	// {body}: an id holding it is refused, so that no byte can move between
	// the id and the body under one signature (hasIDDelim false: no {id}).
	idDelim    byte
	hasIDDelim bool
	// note is what sources check says of the template's rule ("" for none).
	note    string
	id, typ location
	// warning is what the receiver logs at start-up about this source.
	warning string
}

func newHMAC(name string, raw json.RawMessage) (kindVerifier, error) {
	var o hmacOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	v := &hmacVerifier{}
	var err error
	if v.keys, err = hmacSecrets(name, o.Secrets); err != nil {
		return nil, err
	}
	if v.signatureHeader, err = headerOption(name, "signature_header", o.SignatureHeader, true); err != nil {
		return nil, err
	}
	switch o.Algorithm {
	case "", "sha256":
		v.newHash, v.size = sha256.New, sha256.Size
	case "sha512":
		v.newHash, v.size = sha512.New, sha512.Size
	default:
		return nil, fieldError(name, "algorithm", "must be \"sha256\" or \"sha512\", got %q", o.Algorithm)
	}
	switch o.Encoding {
	case "", encodingHex:
		v.encoding = encodingHex
	case encodingBase64:
		v.encoding = encodingBase64
	default:
		return nil, fieldError(name, "encoding", "must be \"hex\" or \"base64\", got %q", o.Encoding)
	}
	if o.SignaturePrefix != "" && (!printable(o.SignaturePrefix) || strings.TrimSpace(o.SignaturePrefix) != o.SignaturePrefix) {
		return nil, fieldError(name, "signature_prefix", "must be printable text without leading or trailing spaces")
	}
	v.prefix = o.SignaturePrefix
	if v.timestampHeader, err = headerOption(name, "timestamp_header", o.TimestampHeader, false); err != nil {
		return nil, err
	}
	if v.timestampHeader != "" && v.timestampHeader == v.signatureHeader {
		return nil, fieldError(name, "timestamp_header", "must differ from signature_header")
	}
	if v.timestampHeader == "" && o.ToleranceSeconds != nil {
		return nil, fieldError(name, "tolerance_seconds", "has no effect without timestamp_header; remove it or set timestamp_header")
	}
	if v.tol, err = toleranceOption(name, o.ToleranceSeconds, DefaultTolerance); err != nil {
		return nil, err
	}
	if o.EventID == nil {
		return nil, fieldError(name, "event_id", `is required: {"header": "X-Event-Id"} or {"json": "data.id"}`)
	}
	if v.id, err = locationOption(name, "event_id", *o.EventID); err != nil {
		return nil, err
	}
	if v.id.header != "" && (v.id.header == v.signatureHeader || v.id.header == v.timestampHeader) {
		return nil, fieldError(name, "event_id.header", "must differ from signature_header and timestamp_header")
	}
	if o.EventType != nil {
		if v.typ, err = locationOption(name, "event_type", *o.EventType); err != nil {
			return nil, err
		}
	}
	if err := v.setContent(name, o.SignedContent); err != nil {
		return nil, err
	}
	if v.unsignedID() {
		if !o.AllowUnsignedEventID {
			return nil, fieldError(name, "event_id", "the header %s is not signed (signed_content has no {id}): anyone holding one captured delivery "+
				"could post it under the sender's next id, and the real event would then be dropped as a duplicate. Sign it with {id} in "+
				"signed_content, read the id from the body ({\"json\": ...}), or set \"allow_unsigned_event_id\": true to accept the risk", v.id.header)
		}
		v.warning = fmt.Sprintf("the event id header %s is not signed (allow_unsigned_event_id): a captured delivery posted under an id the sender has not used yet "+
			"makes the sender's real event with that id a duplicate, which is never processed", v.id.header)
	} else if o.AllowUnsignedEventID {
		return nil, fieldError(name, "allow_unsigned_event_id", "has no effect: the event id is signed or read from the body; remove it")
	}
	return v, nil
}

// unsignedID reports whether the event id comes from a header the
// signature does not cover.
func (v *hmacVerifier) unsignedID() bool { return v.id.header != "" && !v.signsID }

// identityUnsigned implements identityBinder: a body whose id is in an
// unsigned header can come back under a new id.
func (v *hmacVerifier) identityUnsigned() bool { return v.unsignedID() }

// startWarning implements warner.
func (v *hmacVerifier) startWarning() string { return v.warning }

// setContent parses and checks the signed_content template against the
// other options: what the template signs must be what the sender sends.
func (v *hmacVerifier) setContent(name string, tmpl *string) error {
	if tmpl == nil {
		if v.timestampHeader != "" {
			return fieldError(name, "signed_content", "is required with timestamp_header (for example \"{timestamp}.{body}\"): the timestamp must be signed to mean anything")
		}
		v.content = []segment{{kind: segBody}}
		return nil
	}
	segs, err := parseSignedContent(*tmpl)
	if err != nil {
		return fieldError(name, "signed_content", "%s", err)
	}
	var hasTS bool
	for _, s := range segs {
		switch s.kind {
		case segTimestamp:
			hasTS = true
		case segID:
			v.signsID = true
		}
	}
	switch {
	case hasTS && v.timestampHeader == "":
		return fieldError(name, "signed_content", "uses {timestamp} but timestamp_header is not set")
	case !hasTS && v.timestampHeader != "":
		return fieldError(name, "signed_content", "must use {timestamp}, since timestamp_header is set: an unsigned timestamp proves nothing")
	case v.signsID && v.id.header == "":
		return fieldError(name, "signed_content", "uses {id}, which needs event_id to be a header ({\"header\": ...})")
	}
	if err := v.setDelimiters(name, *tmpl, segs); err != nil {
		return err
	}
	v.content = segs
	return nil
}

// setDelimiters refuses a template whose variable parts could trade bytes
// with {body} under one signature, and records the delimiter that an id
// must not contain. The signed content must split one way only: each
// {timestamp} or {id} before {body} is followed by literal text, each one
// after {body} preceded by literal text, and the byte of that text next to
// it (the delimiter) is one the part never holds. A timestamp is digits
// only, so any other delimiter will do ("{timestamp}.{body}"); an id may
// hold anything a header may, so an id holding its delimiter is refused at
// verification, and the delimiter must not be a letter or digit, which
// real ids hold. Reading the parts before {body} from the start (each ends
// at its delimiter's first occurrence) and those after it from the end
// leaves {body} as what is between: one split, whatever the bytes.
func (v *hmacVerifier) setDelimiters(name, tmpl string, segs []segment) error {
	body := slices.IndexFunc(segs, func(s segment) bool { return s.kind == segBody })
	for i, s := range segs {
		if s.kind != segTimestamp && s.kind != segID {
			continue
		}
		part := "{timestamp}"
		if s.kind == segID {
			part = "{id}"
		}
		// The neighbour on body's side, and the delimiter byte in it.
		j, side := i+1, "followed"
		if i > body {
			j, side = i-1, "preceded"
		}
		if segs[j].kind != segLiteral {
			return fieldError(name, "signed_content", "%q is ambiguous: %s must be %s by literal text (such as \".\") on the side of {body}, "+
				"or bytes could move between it and its neighbour under one signature", tmpl, part, side)
		}
		lit := segs[j].literal
		d := lit[0]
		if i > body {
			d = lit[len(lit)-1]
		}
		alnum := 'a' <= d && d <= 'z' || 'A' <= d && d <= 'Z' || '0' <= d && d <= '9'
		switch {
		case s.kind == segTimestamp && '0' <= d && d <= '9':
			return fieldError(name, "signed_content", "%q is ambiguous: the text next to {timestamp} on the side of {body} must not begin with a digit "+
				"(a timestamp is digits, so the split would not be unique); use a separator such as \".\"", tmpl)
		case s.kind == segID && alnum:
			return fieldError(name, "signed_content", "%q is ambiguous: the character next to {id} on the side of {body} is %q, a letter or digit; "+
				"ids that hold it are refused, so it must be a separator ids never hold, such as \".\" or \":\"", tmpl, string(d))
		case s.kind == segID:
			v.idDelim, v.hasIDDelim = d, true
			v.note = fmt.Sprintf("signed_content %q: an id holding %q is refused (signature_malformed): %q separates {id} from {body} in what is signed", tmpl, string(d), string(d))
		}
	}
	return nil
}

// templateNote implements noter.
func (v *hmacVerifier) templateNote() string { return v.note }

// parseSignedContent splits a template into literals and placeholders.
// {body} must appear exactly once; {timestamp} and {id} at most once; any
// other brace is an error (a typo such as {ts} must not sign literal text).
func parseSignedContent(tmpl string) ([]segment, error) {
	var (
		segs   []segment
		counts = map[segmentKind]int{}
		rest   = tmpl
	)
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			segs = append(segs, segment{kind: segLiteral, literal: []byte(rest)})
			break
		}
		if open > 0 {
			segs = append(segs, segment{kind: segLiteral, literal: []byte(rest[:open])})
		}
		if rest[open] == '}' {
			return nil, errString("has a '}' without '{' (placeholders are {body}, {timestamp} and {id})")
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, errString("has a '{' without '}' (placeholders are {body}, {timestamp} and {id})")
		}
		var kind segmentKind
		switch ph := rest[open : open+end+1]; ph {
		case "{body}":
			kind = segBody
		case "{timestamp}":
			kind = segTimestamp
		case "{id}":
			kind = segID
		default:
			return nil, fmt.Errorf("has an unknown placeholder %q (placeholders are {body}, {timestamp} and {id})", ph)
		}
		counts[kind]++
		segs = append(segs, segment{kind: kind})
		rest = rest[open+end+1:]
	}
	if counts[segBody] != 1 {
		return nil, errString("must contain {body} exactly once: the raw body is what the signature protects")
	}
	if counts[segTimestamp] > 1 || counts[segID] > 1 {
		return nil, errString("may contain {timestamp} and {id} at most once each")
	}
	return segs, nil
}

// hmacSecrets reads the secrets: each string is the key byte for byte,
// except that a "base64:" prefix marks a base64-encoded key. Each key must
// be MinSecretBytes long (decoded, for a base64: key).
func hmacSecrets(name string, secrets []string) ([][]byte, error) {
	keys, err := secretBytes(name, secrets)
	if err != nil {
		return nil, err
	}
	for i, s := range secrets {
		enc, ok := strings.CutPrefix(s, "base64:")
		if !ok {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(key) == 0 {
			return nil, fieldError(name, "secrets", "secret #%d has the base64: prefix but is not a non-empty standard base64 key", i+1)
		}
		keys[i] = key
	}
	for i, k := range keys {
		if err := minKeyLength(name, i, len(k), MinSecretBytes); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// headerOption checks a configured header name (an HTTP token) and returns
// it in canonical form.
func headerOption(name, field, value string, required bool) (string, error) {
	if value == "" {
		if required {
			return "", fieldError(name, field, "is required (a header name such as \"X-Signature\")")
		}
		return "", nil
	}
	if len(value) > 256 || !inbox.ValidHeaderName(value) {
		return "", fieldError(name, field, "%q is not a valid header name", value)
	}
	return http.CanonicalHeaderKey(value), nil
}

// locationOption checks an event_id or event_type location: exactly one of
// header and json.
func locationOption(name, field string, l fieldLocation) (location, error) {
	switch {
	case l.Header != "" && l.JSON != "":
		return location{}, fieldError(name, field, "set \"header\" or \"json\", not both")
	case l.Header != "":
		h, err := headerOption(name, field+".header", l.Header, true)
		return location{header: h}, err
	case l.JSON != "":
		keys, err := parseJSONPath(l.JSON)
		if err != nil {
			return location{}, fieldError(name, field+".json", "%s", err)
		}
		return location{path: keys}, nil
	default:
		return location{}, fieldError(name, field, `must be {"header": "X-Event-Id"} or {"json": "data.id"}`)
	}
}

func (v *hmacVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	val, err := oneSignature(h, v.signatureHeader)
	if err != nil {
		return inbox.Identity{}, err
	}
	if v.prefix != "" {
		var ok bool
		if val, ok = strings.CutPrefix(val, v.prefix); !ok {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header does not start with %q", v.signatureHeader, v.prefix)
		}
	}
	sig, err := decodeMAC(v.signatureHeader, val, v.encoding, v.size)
	if err != nil {
		return inbox.Identity{}, err
	}
	var (
		tsRaw, signedID string
		ts              int64
	)
	if v.timestampHeader != "" {
		var ok bool
		if tsRaw, ok = singleHeader(h, v.timestampHeader); !ok {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "exactly one %s header is required", v.timestampHeader)
		}
		// Digits only (ParseInt would take a sign): the template's split
		// relies on it (setDelimiters).
		if !allDigits(tsRaw) {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is not a Unix time in seconds", v.timestampHeader)
		}
		if ts, err = strconv.ParseInt(tsRaw, 10, 64); err != nil || ts <= 0 {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is not a Unix time in seconds", v.timestampHeader)
		}
	}
	if v.signsID {
		var ok bool
		if signedID, ok = singleHeader(h, v.id.header); !ok {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "exactly one %s header is required: it is signed", v.id.header)
		}
		if v.hasIDDelim && strings.IndexByte(signedID, v.idDelim) >= 0 {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header holds %q, which separates the id from the body in the signed content",
				v.id.header, string(v.idDelim))
		}
	}
	if !matchAny(v.keys, v.newHash, sig, v.signedContent(body, tsRaw, signedID)) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured secret")
	}
	if v.timestampHeader != "" && !withinTolerance(time.Unix(ts, 0), now, v.tol) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseTimestampOutOfTolerance, "the signed timestamp is more than %s away from now", v.tol)
	}
	var ident inbox.Identity
	if v.signsID {
		ident.EventID = signedID
	} else if ident.EventID, err = v.read(h, body, v.id, inbox.CauseMissingEventID); err != nil {
		return inbox.Identity{}, err
	}
	if ident.EventType, err = v.read(h, body, v.typ, inbox.CauseInvalidEventType); err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(ident)
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// read returns the value at l: a header (at most once), a JSON path, or ""
// when l is not configured.
func (v *hmacVerifier) read(h http.Header, body []byte, l location, cause inbox.Cause) (string, error) {
	switch {
	case l.header != "":
		return headerIdentity(h, l.header, cause)
	case l.path != nil:
		return pathString(body, l.path)
	default:
		return "", nil
	}
}

// signedContent writes the template with the raw body, the timestamp and
// the id exactly as they were sent.
func (v *hmacVerifier) signedContent(body []byte, ts, id string) func(io.Writer) {
	return func(w io.Writer) {
		for _, s := range v.content {
			switch s.kind {
			case segLiteral:
				w.Write(s.literal)
			case segBody:
				w.Write(body)
			case segTimestamp:
				io.WriteString(w, ts)
			case segID:
				io.WriteString(w, id)
			}
		}
	}
}

// Sign implements Signer as the configured sender would: the signature,
// the timestamp, and the id and type headers where they are headers.
func (v *hmacVerifier) Sign(body []byte, eventID, eventType string, now time.Time) http.Header {
	h := http.Header{}
	var ts string
	if v.timestampHeader != "" {
		ts = strconv.FormatInt(now.Unix(), 10)
		h.Set(v.timestampHeader, ts)
	}
	mac := computeMAC(v.keys[0], v.newHash, v.signedContent(body, ts, eventID))
	h.Set(v.signatureHeader, v.prefix+encodeMAC(mac, v.encoding))
	if v.id.header != "" {
		h.Set(v.id.header, eventID)
	}
	if v.typ.header != "" && eventType != "" {
		h.Set(v.typ.header, eventType)
	}
	return h
}

// tolerance implements tolerant: an hmac source without timestamp_header
// signs no time, so nothing bounds it.
func (v *hmacVerifier) tolerance() time.Duration {
	if v.timestampHeader == "" {
		return 0
	}
	return v.tol
}

// makeSample implements sampleMaker with a failed invoice payment whose id and
// type are where the source reads them: at their JSON paths in the body,
// or in headers (Sign sets those). A source that reads no type gets none.
func (v *hmacVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, _ := randomIDs()
	s := Sample{EventID: "evt_dev_" + suffix, Header: http.Header{}}
	if v.typ.header != "" || v.typ.path != nil {
		s.EventType = "invoice.payment_failed"
	}
	doc := map[string]any{
		"created_at": now.UTC().Format(time.RFC3339),
		"data":       map[string]any{"invoice": "in_dev_" + suffix, "customer": "cus_dev", "amount_due": 2000},
	}
	setPath(doc, v.id.path, s.EventID)
	setPath(doc, v.typ.path, s.EventType)
	body, err := json.Marshal(doc)
	if err != nil {
		return Sample{}, fmt.Errorf("body: %w", err)
	}
	s.Body = body
	return s, nil
}
