package source

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindSquare is Square's scheme: x-square-hmacsha256-signature is the
// base64 HMAC-SHA256 of the subscription's notification URL immediately
// followed by the raw body, keyed with the subscription's signature key.
// The URL is the configured notification_url, never one rebuilt from the
// request (Host and X-Forwarded-* are the sender's to choose). Square signs
// no timestamp; the event id is in the signed body, so dedup stops replays.
const KindSquare = "square"

func init() { register(KindSquare, newSquare) }

// squareSignatureHeader is where Square sends the HMAC-SHA256 signature;
// the legacy HMAC-SHA1 x-square-signature is ignored.
const squareSignatureHeader = "X-Square-Hmacsha256-Signature"

// squareOptions is the JSON configuration of a square source.
type squareOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
	// NotificationURL is the subscription's URL exactly as entered in
	// Square's Developer Console: it is part of the signed content.
	NotificationURL string `json:"notification_url"`
}

type squareVerifier struct {
	keys [][]byte
	url  []byte
}

func newSquare(name string, raw json.RawMessage) (kindVerifier, error) {
	var o squareOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	if err := checkNotificationURL(o.NotificationURL); err != nil {
		return nil, fieldError(name, "notification_url", "%s", err)
	}
	return &squareVerifier{keys: keys, url: []byte(o.NotificationURL)}, nil
}

// checkNotificationURL accepts an absolute https URL, or http for a
// loopback host (local development). The string is used byte for byte,
// never normalised: Square signs the URL exactly as it was entered.
func checkNotificationURL(s string) error {
	if s == "" {
		return errString("is required: the subscription's notification URL exactly as entered in Square (it is part of the signed content)")
	}
	if s != strings.TrimSpace(s) || !printable(s) {
		return errString("must not contain spaces or control characters")
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errString("must be an absolute URL such as https://example.com/webhooks/square")
	}
	if u.User != nil || u.Fragment != "" || strings.Contains(s, "#") {
		return errString("must not contain credentials or a #fragment")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return errString("must use https (http only for localhost, 127.0.0.1 or [::1])")
	}
	return nil
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *squareVerifier) Verify(h http.Header, body []byte, _ time.Time) (inbox.Identity, error) {
	val, err := oneSignature(h, squareSignatureHeader)
	if err != nil {
		return inbox.Identity{}, err
	}
	sig, err := decodeMAC(squareSignatureHeader, val, encodingBase64, sha256.Size)
	if err != nil {
		return inbox.Identity{}, err
	}
	if !matchAny(v.keys, sha256.New, sig, v.signedContent(body)) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured signature key for the configured notification URL")
	}
	f, err := bodyFields(body, "event_id", "type")
	if err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(inbox.Identity{EventID: f["event_id"], EventType: f["type"]})
}

// signedContent writes the notification URL, then the raw body.
func (v *squareVerifier) signedContent(body []byte) func(io.Writer) {
	return func(w io.Writer) {
		w.Write(v.url)
		w.Write(body)
	}
}

// Sign implements Signer with Square's signature header; the id and type
// are in the body.
func (v *squareVerifier) Sign(body []byte, _, _ string, _ time.Time) http.Header {
	h := http.Header{}
	h.Set(squareSignatureHeader, encodeMAC(computeMAC(v.keys[0], sha256.New, v.signedContent(body)), encodingBase64))
	return h
}

// makeSample implements sampleMaker with a created order, shaped like Square's
// order.created notification: the id and type are in the body.
func (v *squareVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, _ := randomIDs()
	id, typ := newUUID(), "order.created"
	at := now.UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`{"merchant_id":"MLDEVFAKE0001","type":%q,"event_id":%q,"created_at":%q,`+
		`"data":{"type":"order","id":"ord_dev_%s","object":{"order_created":{"created_at":%q,"location_id":"LDEVFAKE0001",`+
		`"order_id":"ord_dev_%s","state":"OPEN","version":1}}}}`,
		typ, id, at, suffix, at, suffix)
	return Sample{EventID: id, EventType: typ, Body: []byte(body), Header: http.Header{}}, nil
}
