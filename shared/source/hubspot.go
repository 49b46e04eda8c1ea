package source

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindHubSpot is HubSpot's v3 scheme: X-HubSpot-Signature-v3 is the base64
// HMAC-SHA256, keyed with the app's client secret, of the method (POST),
// the target URL, the raw body and X-HubSpot-Request-Timestamp (Unix
// milliseconds) concatenated; a timestamp more than the tolerance (five
// minutes) from now, either way, is refused. The URL is the configured
// url (with the characters of HubSpot's table decoded), never one rebuilt
// from the request. The v1 and v2 signatures (no timestamp) are ignored.
//
// HubSpot posts a JSON array of up to 100 events. The inbox stores the
// request as one event whose id is derived from every element's identity
// (see hubspotIdentity) and whose type is the elements' common
// subscriptionType, or "batch"; the handler receives the whole array
// (docs/sources/hubspot.md says why).
const KindHubSpot = "hubspot"

func init() { register(KindHubSpot, newHubSpot) }

// HubSpot's headers.
const (
	hubspotSignatureHeader = "X-HubSpot-Signature-v3"
	hubspotTimestampHeader = "X-HubSpot-Request-Timestamp"
)

// hubspotOptions is the JSON configuration of a hubspot source.
type hubspotOptions struct {
	Kind string `json:"kind"`
	// Secrets are the app's client secrets (the new one first during a
	// rotation).
	Secrets []string `json:"secrets"`
	// URL is the app's webhook target URL exactly as configured in
	// HubSpot, query string included: it is part of the signed content.
	URL              string `json:"url"`
	ToleranceSeconds *int   `json:"tolerance_seconds"`
}

type hubspotVerifier struct {
	keys [][]byte
	uri  []byte
	tol  time.Duration
}

func newHubSpot(name string, raw json.RawMessage) (kindVerifier, error) {
	var o hubspotOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	if o.URL == "" {
		return nil, fieldError(name, "url", "is required: the app's webhook target URL exactly as configured in HubSpot (it is part of the signed content)")
	}
	if err := checkNotificationURL(o.URL); err != nil {
		return nil, fieldError(name, "url", "%s", err)
	}
	tol, err := toleranceOption(name, o.ToleranceSeconds, DefaultTolerance)
	if err != nil {
		return nil, err
	}
	return &hubspotVerifier{keys: keys, uri: []byte(hubspotURI(o.URL)), tol: tol}, nil
}

// hubspotDecoded are the escapes HubSpot's v3 instructions decode in the
// URI before signing ("%3F" too, although the query's own '?' is never
// escaped); both hex cases are decoded.
var hubspotDecoded = strings.NewReplacer(
	"%3A", ":", "%2F", "/", "%3F", "?", "%40", "@", "%21", "!", "%24", "$",
	"%27", "'", "%28", "(", "%29", ")", "%2A", "*", "%2C", ",", "%3B", ";",
	"%3a", ":", "%2f", "/", "%3f", "?", "%2a", "*", "%2c", ",", "%3b", ";",
)

// hubspotURI is the configured URL as HubSpot signs it.
func hubspotURI(u string) string { return hubspotDecoded.Replace(u) }

// maxHubSpotTimestampDigits bounds the timestamp header: 13 digits are
// milliseconds until the year 2286.
const maxHubSpotTimestampDigits = 16

func (v *hubspotVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	val, err := oneSignature(h, hubspotSignatureHeader)
	if err != nil {
		return inbox.Identity{}, err
	}
	sig, err := decodeMAC(hubspotSignatureHeader, val, encodingBase64, sha256.Size)
	if err != nil {
		return inbox.Identity{}, err
	}
	tsText, ok := singleHeader(h, hubspotTimestampHeader)
	if !ok {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is missing or repeated", hubspotTimestampHeader)
	}
	ms, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || ms <= 0 || len(tsText) > maxHubSpotTimestampDigits || tsText[0] == '+' {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is not a Unix time in milliseconds", hubspotTimestampHeader)
	}
	if !matchAny(v.keys, sha256.New, sig, v.signedContent(body, tsText)) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured client secret for the configured URL")
	}
	if !withinTolerance(time.UnixMilli(ms), now, v.tol) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseTimestampOutOfTolerance, "the signed timestamp is more than %s away from now", v.tol)
	}
	return hubspotIdentity(body)
}

// signedContent writes the method, the URI, the raw body and the timestamp
// exactly as the header carries it.
func (v *hubspotVerifier) signedContent(body []byte, ts string) func(io.Writer) {
	return func(w io.Writer) {
		io.WriteString(w, http.MethodPost)
		w.Write(v.uri)
		w.Write(body)
		io.WriteString(w, ts)
	}
}

// hubspotEvent is what the id and type are derived from, of one element.
// The numbers are kept as their JSON text.
type hubspotEvent struct {
	EventID          json.RawMessage `json:"eventId"`
	SubscriptionID   json.RawMessage `json:"subscriptionId"`
	PortalID         json.RawMessage `json:"portalId"`
	OccurredAt       json.RawMessage `json:"occurredAt"`
	SubscriptionType json.RawMessage `json:"subscriptionType"`
}

// hubspotIdentity reads a signed body: a JSON array of 1 or more objects,
// each with an eventId (a number or a string).
//
// The id is "<first eventId>-<count>-<digest>": the digest is the first
// 32 hex digits of SHA-256 over every element's (portalId, subscriptionId,
// eventId, occurredAt), sorted, length-prefixed. HubSpot says eventId
// alone is not guaranteed unique, hence the other three; attemptNumber,
// which grows with each retry, is left out, so a retried batch is the same
// event (a duplicate, whose changed attemptNumbers are recorded as a
// payload mismatch), and the order of the elements does not matter.
//
// The type is the subscriptionType all the elements share, or "batch".
func hubspotIdentity(body []byte) (inbox.Identity, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseUnparsableBody, "the body must be a JSON array of events")
	}
	var events []hubspotEvent
	if !json.Valid(body) || json.Unmarshal(body, &events) != nil {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseUnparsableBody, "the body is not a JSON array of event objects")
	}
	if len(events) == 0 {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseMissingEventID, "the body is an empty array: no event")
	}
	keys := make([]string, len(events))
	var typ string
	for i, e := range events {
		id, err := hubspotScalar("eventId", e.EventID)
		if err != nil {
			return inbox.Identity{}, err
		}
		if id == "" {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseMissingEventID, "event #%d has no eventId", i+1)
		}
		var parts [4]string // portalId, subscriptionId, eventId, occurredAt
		for j, f := range []json.RawMessage{e.PortalID, e.SubscriptionID, e.EventID, e.OccurredAt} {
			if parts[j], err = hubspotScalar([]string{"portalId", "subscriptionId", "eventId", "occurredAt"}[j], f); err != nil {
				return inbox.Identity{}, err
			}
		}
		var b strings.Builder
		var n [8]byte
		for _, p := range parts {
			binary.BigEndian.PutUint64(n[:], uint64(len(p)))
			b.Write(n[:])
			b.WriteString(p)
		}
		keys[i] = b.String()
		st, err := hubspotScalar("subscriptionType", e.SubscriptionType)
		if err != nil {
			return inbox.Identity{}, err
		}
		switch {
		case i == 0:
			typ = st
		case st != typ:
			typ = "batch"
		}
	}
	if typ == "" {
		typ = "batch"
	}
	first, _ := hubspotScalar("eventId", events[0].EventID)
	slices.Sort(keys)
	digest := sha256.New()
	for _, k := range keys {
		io.WriteString(digest, k)
	}
	id := fmt.Sprintf("%s-%d-%s", first, len(events), hex.EncodeToString(digest.Sum(nil))[:32])
	if len(first) > 64 || !printable(first) {
		id = fmt.Sprintf("%d-%s", len(events), hex.EncodeToString(digest.Sum(nil))[:32])
	}
	return checkIdentity(inbox.Identity{EventID: id, EventType: typ})
}

// hubspotScalar reads a field that may be a JSON number (kept as its
// text) or a string; absent or null is "".
func hubspotScalar(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		return stringToken(name, raw)
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), nil
	default:
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "field %q must be a number or a string", name)
	}
}

// Sign implements Signer with HubSpot's v3 headers, dated now.
func (v *hubspotVerifier) Sign(body []byte, _, _ string, now time.Time) http.Header {
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	mac := hmac.New(sha256.New, v.keys[0])
	v.signedContent(body, ts)(mac)
	h := http.Header{}
	h.Set(hubspotSignatureHeader, encodeMAC(mac.Sum(nil), encodingBase64))
	h.Set(hubspotTimestampHeader, ts)
	return h
}

// tolerance implements tolerant.
func (v *hubspotVerifier) tolerance() time.Duration { return v.tol }

// makeSample implements sampleMaker with a batch of two contact property changes,
// shaped like HubSpot's: the id and type come from the body.
func (v *hubspotVerifier) makeSample(now time.Time) (Sample, error) {
	_, n := randomIDs()
	first, second := n%1_000_000_000, n%1_000_000_000+1
	at := now.UnixMilli()
	body := fmt.Sprintf(`[{"eventId":%d,"subscriptionId":2245730,"portalId":62515,"appId":54321,"occurredAt":%d,`+
		`"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":1246965,"propertyName":"lifecyclestage",`+
		`"propertyValue":"customer","changeSource":"CRM_UI","sourceId":"userId:dev"},`+
		`{"eventId":%d,"subscriptionId":2245730,"portalId":62515,"appId":54321,"occurredAt":%d,`+
		`"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":1246966,"propertyName":"lifecyclestage",`+
		`"propertyValue":"lead","changeSource":"CRM_UI","sourceId":"userId:dev"}]`,
		first, at, second, at)
	id, err := hubspotIdentity([]byte(body))
	if err != nil {
		return Sample{}, err
	}
	h := http.Header{}
	h.Set("User-Agent", "HubSpot Connect 2.0 (http://dev.hubspot.com/)")
	return Sample{EventID: id.EventID, EventType: id.EventType, Body: []byte(body), Header: h}, nil
}
