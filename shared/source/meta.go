package source

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindMeta is Meta's Webhooks (Facebook, Instagram, WhatsApp, Messenger):
// X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body keyed with
// the app secret>, GitHub's header. Meta signs no timestamp and sends no
// delivery id: the event id is derived from the signed body (bodyEventID)
// and the captured-body guard applies. The verification request, a GET
// with hub.mode=subscribe, hub.verify_token and hub.challenge, is signed by
// nothing: the verify token authenticates it, compared in constant time
// with the configured ones, and the challenge is answered as plain text.
const KindMeta = "meta"

func init() { register(KindMeta, newMeta) }

// metaOptions is the JSON configuration of a meta source.
type metaOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
	// VerifyTokens are the verify tokens set in the app's webhook
	// settings (several during a change); none, and every verification
	// request is refused.
	VerifyTokens []string `json:"verify_tokens"`
}

type metaVerifier struct {
	keys [][]byte
	// verify holds the SHA-256 of each verify token: compared digest to
	// digest, the time taken does not depend on the tokens' lengths.
	verify [][sha256.Size]byte
}

func newMeta(name string, raw json.RawMessage) (kindVerifier, error) {
	var o metaOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	v := &metaVerifier{keys: keys}
	for i, t := range o.VerifyTokens {
		if len(t) < MinSecretBytes {
			return nil, fieldError(name, "verify_tokens", "verify token #%d is %d bytes long; at least %d are required (it is a password: choose a long random one)", i+1, len(t), MinSecretBytes)
		}
		v.verify = append(v.verify, sha256.Sum256([]byte(t)))
	}
	return v, nil
}

func (v *metaVerifier) Verify(h http.Header, body []byte, _ time.Time) (inbox.Identity, error) {
	if err := verifyHubSignature(v.keys, h, body); err != nil {
		return inbox.Identity{}, err
	}
	typ, err := metaType(body)
	if err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(inbox.Identity{EventID: bodyEventID(body), EventType: typ})
}

// metaType is the event type: the body's object (page, instagram,
// whatsapp_business_account, ...) and, when the first entry has changes,
// the first change's field ("whatsapp_business_account.messages").
func metaType(body []byte) (string, error) {
	f, err := bodyFields(body, "object")
	if err != nil {
		return "", err
	}
	if f["object"] == "" {
		return "", inbox.Errorf(inbox.CauseInvalidEventType, "the body has no object")
	}
	var env struct {
		Entry []struct {
			Changes []struct {
				Field json.RawMessage `json:"field"`
			} `json:"changes"`
		} `json:"entry"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Entry) == 0 || len(env.Entry[0].Changes) == 0 {
		return f["object"], nil // messaging entries have no changes
	}
	field, err := stringToken("entry.changes.field", env.Entry[0].Changes[0].Field)
	if err != nil || field == "" {
		return f["object"], nil
	}
	return f["object"] + "." + field, nil
}

// identityUnsigned implements identityBinder: Meta signs no time, so a
// captured body could be posted again at any time. Its id is the body's
// hash, which already makes a replay a duplicate while the event is
// kept; the guard is set as for every sender without a signed time or
// delivery id, and can only agree.
func (v *metaVerifier) identityUnsigned() bool { return true }

// Handshake implements Handshaker: Meta's verification request, a GET with
// hub.mode=subscribe, is answered with hub.challenge as plain text iff
// hub.verify_token is one of the configured verify tokens. Each query
// parameter must appear exactly once.
func (v *metaVerifier) Handshake(r HandshakeRequest) (HandshakeAnswer, bool, error) {
	if r.Method != http.MethodGet || r.Query.Get("hub.mode") != "subscribe" {
		return HandshakeAnswer{}, false, nil
	}
	tokens := r.Query["hub.verify_token"]
	switch {
	case len(tokens) == 0 || tokens[0] == "":
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseSignatureMissing, "the verification request has no hub.verify_token")
	case len(tokens) > 1 || len(r.Query["hub.mode"]) > 1:
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseSignatureMalformed, "hub.mode and hub.verify_token must appear once")
	}
	got := sha256.Sum256([]byte(tokens[0]))
	matched := 0
	for _, want := range v.verify {
		matched |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	if matched != 1 {
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseSignatureMismatch, "hub.verify_token is none of the source's verify_tokens")
	}
	challenges := r.Query["hub.challenge"]
	if len(challenges) != 1 || !handshakeToken(challenges[0]) {
		return HandshakeAnswer{}, false, inbox.Errorf(inbox.CauseInvalidRequest, "hub.challenge must appear once, 1 to %d letters, digits or -._~+/=", maxHandshakeToken)
	}
	return HandshakeAnswer{ContentType: "text/plain; charset=utf-8", Body: []byte(challenges[0])}, true, nil
}

// Sign implements Signer with Meta's X-Hub-Signature-256 header.
func (v *metaVerifier) Sign(body []byte, _, _ string, _ time.Time) http.Header {
	h := http.Header{}
	h.Set(hubSignatureHeader, hubSignature(v.keys[0], body))
	return h
}

// makeSample implements sampleMaker with a WhatsApp Business message, shaped as
// Meta documents it; its id is the body's hash (bodyEventID).
func (v *metaVerifier) makeSample(now time.Time) (Sample, error) {
	suffix, number := randomIDs()
	body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"%d","changes":[{"value":{`+
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550000000","phone_number_id":"%d"},`+
		`"contacts":[{"profile":{"name":"Dev Sample"},"wa_id":"15550000001"}],`+
		`"messages":[{"from":"15550000001","id":"wamid.DEV%s","timestamp":"%d","text":{"body":"Sent by webhookdev sample."},"type":"text"}]},`+
		`"field":"messages"}]}]}`,
		number%1000000000000000, number%100000000000000, strings.ToUpper(suffix), now.Unix())
	h := http.Header{}
	h.Set("User-Agent", "facebookexternalua")
	return Sample{EventID: bodyEventID([]byte(body)), EventType: "whatsapp_business_account.messages", Body: []byte(body), Header: h}, nil
}
