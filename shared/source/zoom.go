package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindZoom is Zoom's scheme: x-zm-signature: v0=<hex HMAC-SHA256 of
// "v0:{x-zm-request-timestamp}:{body}"> keyed with the webhook's secret
// token, the timestamp within the tolerance either way (Slack's scheme,
// slack.go's v0Scheme). Zoom sends no delivery id: the event id is derived
// from the signed body (bodyEventID). The endpoint.url_validation
// challenge, signed like any request, is answered with the plain token and
// its HMAC under the secret that signed it, and never stored.
const KindZoom = "zoom"

func init() { register(KindZoom, newZoom) }

// Zoom's headers.
const (
	zoomSignatureHeader  = "X-Zm-Signature"
	zoomTimestampHeader  = "X-Zm-Request-Timestamp"
	zoomTrackingIDHeader = "X-Zm-Trackingid"
)

// zoomValidationEvent is the event of Zoom's endpoint validation.
const zoomValidationEvent = "endpoint.url_validation"

type zoomVerifier struct {
	keys [][]byte
	tol  time.Duration
}

func newZoom(name string, raw json.RawMessage) (kindVerifier, error) {
	keys, tol, err := v0Keys(name, raw)
	if err != nil {
		return nil, err
	}
	return &zoomVerifier{keys: keys, tol: tol}, nil
}

var zoomScheme = v0Scheme{signatureHeader: zoomSignatureHeader, timestampHeader: zoomTimestampHeader}

func (v *zoomVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	if _, err := zoomScheme.verify(v.keys, h, body, now, v.tol); err != nil {
		return inbox.Identity{}, err
	}
	f, err := bodyFields(body, "event")
	if err != nil {
		return inbox.Identity{}, err
	}
	if f["event"] == "" {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseInvalidEventType, "the body has no event")
	}
	return checkIdentity(inbox.Identity{
		EventID:   bodyEventID(body),
		EventType: f["event"],
		Metadata:  headerMetadata(h, metadataHeaders[KindZoom]...),
	})
}

// bodyEventID is the event id of senders that send none (zoom, meta):
// "sha256:" and the hex SHA-256 of the raw body. The body is signed, so
// the id is too; a retry, which carries the same body, is a duplicate,
// and two events differ in their bodies (each carries its time and
// object).
func bodyEventID(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Handshake implements Handshaker: Zoom's endpoint.url_validation, a POST
// signed like any request, is answered {"plainToken": ...,
// "encryptedToken": hex HMAC-SHA256 of the plain token} under the secret
// that signed it, once signature and timestamp are verified. The body is
// looked at only after that.
func (v *zoomVerifier) Handshake(r HandshakeRequest) (HandshakeAnswer, bool, error) {
	if r.Method != http.MethodPost || !bytes.Contains(r.Body, []byte(zoomValidationEvent)) {
		return HandshakeAnswer{}, false, nil
	}
	i, err := zoomScheme.verify(v.keys, r.Header, r.Body, r.Now, v.tol)
	if err != nil {
		return HandshakeAnswer{}, false, err
	}
	f, err := bodyFields(r.Body, "event")
	if err != nil || f["event"] != zoomValidationEvent {
		return HandshakeAnswer{}, false, nil // Verify answers it as a delivery
	}
	plain, err := pathString(r.Body, []string{"payload", "plainToken"})
	if err != nil || !handshakeToken(plain) {
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseUnparsableBody, "the url_validation payload.plainToken must be 1 to %d letters, digits or -._~+/=", maxHandshakeToken)
	}
	return jsonAnswer(map[string]string{"plainToken": plain, "encryptedToken": zoomEncryptedToken(v.keys[i], plain)}), true, nil
}

// zoomEncryptedToken is Zoom's answer to a plain token: the hex
// HMAC-SHA256 of it, keyed with the secret token.
func zoomEncryptedToken(key []byte, plain string) string {
	return encodeMAC(computeMAC(key, sha256.New, func(w io.Writer) { io.WriteString(w, plain) }), encodingHex)
}

// Sign implements Signer with Zoom's two headers.
func (v *zoomVerifier) Sign(body []byte, _, _ string, now time.Time) http.Header {
	return zoomScheme.sign(v.keys[0], body, now)
}

// tolerance implements tolerant.
func (v *zoomVerifier) tolerance() time.Duration { return v.tol }

// makeSample implements sampleMaker with a meeting.started event, shaped as Zoom
// documents it; its id is the body's hash (bodyEventID).
func (v *zoomVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, number := randomIDs()
	body := fmt.Sprintf(`{"event":"meeting.started","event_ts":%d,"payload":{"account_id":"DevAcct0Zoom",`+
		`"object":{"id":"%d","uuid":"dev%s==","host_id":"DevHost0Zoom","topic":"Dev sample meeting","type":2,`+
		`"start_time":%q,"timezone":"UTC","duration":30}}}`,
		now.UnixMilli(), number%100000000000, suffix, now.UTC().Format(time.RFC3339))
	h := http.Header{}
	h.Set(zoomTrackingIDHeader, "v=2.0&s="+suffix)
	h.Set("User-Agent", "Zoom Marketplace/1.0a")
	return Sample{EventID: bodyEventID([]byte(body)), EventType: "meeting.started", Body: []byte(body), Header: h}, nil
}
