package source

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindTwilio is Twilio's scheme: X-Twilio-Signature is the base64
// HMAC-SHA1, keyed with the account's auth token, of the URL Twilio
// requested followed by every POST parameter, sorted by name, each name
// immediately followed by its value. The URL is the configured url, never
// one rebuilt from the request. The body is an
// application/x-www-form-urlencoded form, parsed strictly before the
// signature is checked (the parameters are what is signed, not the bytes).
//
// Twilio signs no timestamp, and its I-Twilio-Idempotency-Token header is
// not signed: the event id is derived from the signed parameters (their
// digest of the signed string), so the same delivery always
// has the same id (dedup stops its replays and Twilio's retries) and no
// two different deliveries share one. Twilio's JSON deliveries (signed
// with a bodySHA256 query parameter the receiver does not see) are refused
// with a message saying so (docs/sources/twilio.md).
const KindTwilio = "twilio"

func init() { register(KindTwilio, newTwilio) }

// Twilio's headers.
const (
	twilioSignatureHeader   = "X-Twilio-Signature"
	twilioIdempotencyHeader = "I-Twilio-Idempotency-Token"
)

// twilioOptions is the JSON configuration of a twilio source.
type twilioOptions struct {
	Kind string `json:"kind"`
	// Secrets are the account's auth tokens (primary first; the secondary
	// during a rotation).
	Secrets []string `json:"secrets"`
	// URL is the webhook URL exactly as configured in Twilio (the phone
	// number's or service's webhook), query string included: it is the
	// start of the signed content.
	URL string `json:"url"`
	// EventType, when set, is every event's type instead of the one
	// derived from the parameters.
	EventType string `json:"event_type"`
}

type twilioVerifier struct {
	keys      [][]byte
	url       []byte
	eventType string
}

func newTwilio(name string, raw json.RawMessage) (kindVerifier, error) {
	var o twilioOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	if o.URL == "" {
		return nil, fieldError(name, "url", "is required: the webhook URL exactly as configured in Twilio (it is part of the signed content)")
	}
	if err := checkNotificationURL(o.URL); err != nil {
		return nil, fieldError(name, "url", "%s", err)
	}
	if len(o.EventType) > inbox.MaxEventTypeBytes || !printable(o.EventType) {
		return nil, fieldError(name, "event_type", "must be printable text of at most %d bytes", inbox.MaxEventTypeBytes)
	}
	return &twilioVerifier{keys: keys, url: []byte(o.URL), eventType: o.EventType}, nil
}

// formParam is one decoded name=value pair of a form body.
type formParam struct{ name, value string }

// parseForm decodes an application/x-www-form-urlencoded body strictly:
// pairs separated by '&', each with exactly one unescaped '=' after a
// non-empty name, only the characters a form encoder writes (no spaces,
// controls, ';' or bytes above 0x7e), and valid %XX escapes. An empty body
// is a form without parameters. The pairs are returned sorted by name,
// then value: the order Twilio signs them in (its libraries sort a
// repeated name's values).
func parseForm(body []byte) ([]formParam, error) {
	if len(body) == 0 {
		return nil, nil
	}
	for _, c := range body {
		if c <= ' ' || c >= 0x7f || c == ';' {
			return nil, errString("the body has a character a form encoder never writes (spaces, controls, ';' and non-ASCII bytes are percent-encoded)")
		}
	}
	segments := strings.Split(string(body), "&")
	params := make([]formParam, 0, len(segments))
	for _, seg := range segments {
		n, v, ok := strings.Cut(seg, "=")
		if !ok || n == "" || strings.Contains(v, "=") {
			return nil, errString("the body is not a form of name=value pairs separated by '&'")
		}
		name, err1 := url.QueryUnescape(n)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, errString("the body has an invalid %-escape")
		}
		params = append(params, formParam{name, value})
	}
	slices.SortStableFunc(params, func(a, b formParam) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	return params, nil
}

// isJSONDelivery reports whether the request is one of Twilio's JSON
// deliveries: a JSON content type, or a body that opens like JSON.
func isJSONDelivery(h http.Header, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return true
	}
	trimmed := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	return strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")
}

func (v *twilioVerifier) Verify(h http.Header, body []byte, _ time.Time) (inbox.Identity, error) {
	val, err := oneSignature(h, twilioSignatureHeader)
	if err != nil {
		return inbox.Identity{}, err
	}
	sig, err := decodeMAC(twilioSignatureHeader, val, encodingBase64, sha1.Size)
	if err != nil {
		return inbox.Identity{}, err
	}
	// What is signed are the parsed parameters: a body that is not a form
	// cannot match any signature. Both refusals come before the request is
	// authenticated, so they carry an authentication cause (answered as
	// every unauthenticated request is); the operator's record says why.
	if isJSONDelivery(h, body) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "Twilio's JSON deliveries (signed with a bodySHA256 query parameter) are not supported: configure the webhook to send form parameters")
	}
	params, err := parseForm(body)
	if err != nil {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "no signature can match: %s", err)
	}
	if !matchAny(v.keys, sha1.New, sig, v.signedContent(params)) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured auth token for the configured URL")
	}
	if len(params) == 0 {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseMissingEventID, "the form has no parameters: nothing identifies the event")
	}
	return checkIdentity(v.identity(params, h))
}

// signedContent writes the configured URL, then each parameter's name and
// value, in parseForm's order.
func (v *twilioVerifier) signedContent(params []formParam) func(io.Writer) {
	return func(w io.Writer) {
		w.Write(v.url)
		for _, p := range params {
			io.WriteString(w, p.name)
			io.WriteString(w, p.value)
		}
	}
}

// twilioSIDs are the parameters naming what a delivery is about, kept as
// metadata, in order of preference.
var twilioSIDs = []string{"MessageSid", "SmsSid", "CallSid"}

// identity derives the event's id and type from the signed parameters.
//
// The id is the first 32 hex digits of SHA-256 over the signed
// concatenation of the parameters (what follows the URL in the signed
// content). Twilio's scheme does not delimit a name from its value nor a
// pair from the next, so "MessageStatus=delivered" and
// "MessageStatusd=elivered" carry the same signature: an id taken from
// any one parameter could be moved by an attacker holding one captured
// delivery, making it a new event. Taken from the signed string, every
// form a signature covers has the same id: a retry, a replay or a
// re-encoding of a delivery is a duplicate, and two different deliveries
// (a message's next status) differ. The message's or call's SID and the
// unsigned I-Twilio-Idempotency-Token are metadata only.
//
// The type is the configured event_type, else EventType (Conversations,
// TaskRouter), else "message.<MessageStatus or SmsStatus>", else
// "call.<CallStatus>", else none.
func (v *twilioVerifier) identity(params []formParam, h http.Header) inbox.Identity {
	get := func(name string) string {
		i := slices.IndexFunc(params, func(p formParam) bool { return p.name == name })
		if i < 0 {
			return ""
		}
		return params[i].value
	}
	digest := sha256.New()
	for _, p := range params {
		io.WriteString(digest, p.name)
		io.WriteString(digest, p.value)
	}
	id := hex.EncodeToString(digest.Sum(nil))[:32]
	typ := v.eventType
	if typ == "" {
		switch {
		case get("EventType") != "":
			typ = get("EventType")
		case get("MessageStatus") != "":
			typ = "message." + get("MessageStatus")
		case get("SmsStatus") != "":
			typ = "message." + get("SmsStatus")
		case get("CallStatus") != "":
			typ = "call." + get("CallStatus")
		}
	}
	meta := headerMetadata(h, metadataHeaders[KindTwilio]...)
	keep := func(key, val string) {
		if val == "" || len(val) > inbox.MaxEventIDBytes || !printable(val) {
			return
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta[key] = val
	}
	keep("twilio_account_sid", get("AccountSid"))
	for _, name := range twilioSIDs {
		if sid := get(name); sid != "" {
			keep("twilio_sid", sid)
			break
		}
	}
	return inbox.Identity{EventID: id, EventType: typ, Metadata: meta}
}

// Sign implements Signer as Twilio signs a form body (an unparsable one is
// signed as a form without parameters, which Verify never accepts); the id
// and type come from the parameters.
func (v *twilioVerifier) Sign(body []byte, _, _ string, _ time.Time) http.Header {
	params, _ := parseForm(body)
	h := http.Header{}
	h.Set(twilioSignatureHeader, encodeMAC(computeMAC(v.keys[0], sha1.New, v.signedContent(params)), encodingBase64))
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h
}

// makeSample implements sampleMaker with a delivered message's status callback,
// shaped like Twilio's: the id and type come from its parameters.
func (v *twilioVerifier) makeSample(_ time.Time) (Sample, error) {
	a, _ := randomIDs()
	b, _ := randomIDs()
	sid := "SM" + a + b
	form := url.Values{
		"AccountSid":    {"ACdev0000000000000000000000000000"},
		"ApiVersion":    {"2010-04-01"},
		"From":          {"+15005550006"},
		"MessageSid":    {sid},
		"MessageStatus": {"delivered"},
		"SmsSid":        {sid},
		"SmsStatus":     {"delivered"},
		"To":            {"+15005550001"},
	}
	body := []byte(form.Encode())
	params, err := parseForm(body)
	if err != nil {
		return Sample{}, err
	}
	id := v.identity(params, nil)
	h := http.Header{}
	h.Set(twilioIdempotencyHeader, newUUID())
	h.Set("User-Agent", "TwilioProxy/1.1")
	return Sample{EventID: id.EventID, EventType: id.EventType, Body: body, Header: h}, nil
}
