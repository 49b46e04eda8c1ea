package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindSlack is Slack's Events API scheme: X-Slack-Signature:
// v0=<hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}"> keyed
// with the app's signing secret, the timestamp within the tolerance
// either way. The event id is the body's event_id; Slack's
// url_verification challenge, signed like any request, is answered with
// its challenge and never stored (docs/sources/slack.md).
const KindSlack = "slack"

func init() { register(KindSlack, newSlack) }

// Slack's headers.
const (
	slackSignatureHeader   = "X-Slack-Signature"
	slackTimestampHeader   = "X-Slack-Request-Timestamp"
	slackRetryNumHeader    = "X-Slack-Retry-Num"
	slackRetryReasonHeader = "X-Slack-Retry-Reason"
)

// v0Options is the JSON configuration of a source whose sender signs
// with the v0 scheme (slack, zoom): its secrets and timestamp tolerance.
type v0Options struct {
	Kind             string   `json:"kind"`
	Secrets          []string `json:"secrets"`
	ToleranceSeconds *int     `json:"tolerance_seconds"`
}

// v0Keys reads a v0 source's options: its secrets as keys and its
// tolerance.
func v0Keys(name string, raw json.RawMessage) ([][]byte, time.Duration, error) {
	var o v0Options
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, 0, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, 0, err
	}
	tol, err := toleranceOption(name, o.ToleranceSeconds, DefaultTolerance)
	if err != nil {
		return nil, 0, err
	}
	return keys, tol, nil
}

type slackVerifier struct {
	keys [][]byte
	tol  time.Duration
}

func newSlack(name string, raw json.RawMessage) (kindVerifier, error) {
	keys, tol, err := v0Keys(name, raw)
	if err != nil {
		return nil, err
	}
	return &slackVerifier{keys: keys, tol: tol}, nil
}

// v0Scheme is the signature Slack and Zoom share: a "v0=" and hex
// HMAC-SHA256 header over "v0:{timestamp}:{body}", the timestamp (Unix
// seconds) in a header of its own.
type v0Scheme struct {
	signatureHeader, timestampHeader string
}

// verify checks h's signature over body under any of keys, then the
// timestamp against now and tol. It returns the index of the key that
// matched. The timestamp must be plain decimal digits, as the senders
// write it: the signed text is the header's, so a "+1531420618" or a
// leading zero would be a second spelling of one instant.
func (s v0Scheme) verify(keys [][]byte, h http.Header, body []byte, now time.Time, tol time.Duration) (int, error) {
	val, err := oneSignature(h, s.signatureHeader)
	if err != nil {
		return -1, err
	}
	hexSig, ok := strings.CutPrefix(val, "v0=")
	if !ok {
		return -1, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header must be v0=<hex>", s.signatureHeader)
	}
	sig, err := decodeMAC(s.signatureHeader, hexSig, encodingHex, sha256.Size)
	if err != nil {
		return -1, err
	}
	tsText, ok := singleHeader(h, s.timestampHeader)
	if !ok {
		return -1, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header must appear exactly once", s.timestampHeader)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || ts <= 0 || strconv.FormatInt(ts, 10) != tsText {
		return -1, inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header is not a Unix time", s.timestampHeader)
	}
	i := matchIndex(keys, sha256.New, sig, func(w io.Writer) {
		io.WriteString(w, "v0:"+tsText+":")
		w.Write(body)
	})
	if i < 0 {
		return -1, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured secret")
	}
	if !withinTolerance(time.Unix(ts, 0), now, tol) {
		return -1, inbox.Errorf(inbox.CauseTimestampOutOfTolerance, "the signed timestamp is more than %s away from now", tol)
	}
	return i, nil
}

// sign returns the two headers under key at now.
func (s v0Scheme) sign(key, body []byte, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	mac := computeMAC(key, sha256.New, func(w io.Writer) {
		io.WriteString(w, "v0:"+ts+":")
		w.Write(body)
	})
	h := http.Header{}
	h.Set(s.signatureHeader, "v0="+encodeMAC(mac, encodingHex))
	h.Set(s.timestampHeader, ts)
	return h
}

var slackScheme = v0Scheme{signatureHeader: slackSignatureHeader, timestampHeader: slackTimestampHeader}

func (v *slackVerifier) Verify(h http.Header, body []byte, now time.Time) (inbox.Identity, error) {
	if _, err := slackScheme.verify(v.keys, h, body, now, v.tol); err != nil {
		return inbox.Identity{}, err
	}
	f, err := bodyFields(body, "type", "event_id")
	if err != nil {
		return inbox.Identity{}, err
	}
	typ := f["type"]
	if typ == "event_callback" {
		// The event's own type (message, app_mention, ...) says more than
		// the envelope's.
		inner, err := pathString(body, []string{"event", "type"})
		if err != nil {
			return inbox.Identity{}, inbox.Errorf(inbox.CauseInvalidEventType, "the event's type must be a string")
		}
		if inner != "" {
			typ = inner
		}
	}
	return checkIdentity(inbox.Identity{
		EventID:   f["event_id"],
		EventType: typ,
		Metadata:  headerMetadata(h, metadataHeaders[KindSlack]...),
	})
}

// Handshake implements Handshaker: Slack's url_verification, a POST signed
// like any request, is answered {"challenge": ...} once its signature and
// timestamp are verified. The body is looked at only after that; a body
// that does not even contain the word is not one, and is left to Verify
// without a second MAC.
func (v *slackVerifier) Handshake(r HandshakeRequest) (HandshakeAnswer, bool, error) {
	if r.Method != http.MethodPost || !bytes.Contains(r.Body, []byte("url_verification")) {
		return HandshakeAnswer{}, false, nil
	}
	if _, err := slackScheme.verify(v.keys, r.Header, r.Body, r.Now, v.tol); err != nil {
		return HandshakeAnswer{}, false, err
	}
	f, err := bodyFields(r.Body, "type", "challenge")
	if err != nil || f["type"] != "url_verification" {
		return HandshakeAnswer{}, false, nil // Verify answers it as a delivery
	}
	if !handshakeToken(f["challenge"]) {
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseUnparsableBody, "the url_verification challenge must be 1 to %d letters, digits or -._~+/=", maxHandshakeToken)
	}
	return jsonAnswer(map[string]string{"challenge": f["challenge"]}), true, nil
}

// Sign implements Signer with Slack's two headers.
func (v *slackVerifier) Sign(body []byte, _, _ string, now time.Time) http.Header {
	return slackScheme.sign(v.keys[0], body, now)
}

// tolerance implements tolerant.
func (v *slackVerifier) tolerance() time.Duration { return v.tol }

// makeSample implements sampleMaker with an Events API event_callback (an
// app_mention), shaped as Slack documents it: the id and type are in the
// body.
func (v *slackVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, _ := randomIDs()
	id := "Ev" + strings.ToUpper(suffix[:10])
	ts := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	body := fmt.Sprintf(`{"token":"dev-verification-token","team_id":"T0DEVTEAM","api_app_id":"A0DEVAPP","type":"event_callback",`+
		`"event":{"type":"app_mention","user":"U0DEVUSER","text":"<@U0DEVBOT> sent by webhookdev sample","ts":%q,"channel":"C0DEVCHAN","event_ts":%q},`+
		`"event_id":%q,"event_time":%d,"authorizations":[{"team_id":"T0DEVTEAM","user_id":"U0DEVBOT","is_bot":true}],"is_ext_shared_channel":false}`,
		ts, ts, id, now.Unix())
	h := http.Header{}
	h.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	return Sample{EventID: id, EventType: "app_mention", Body: []byte(body), Header: h}, nil
}
