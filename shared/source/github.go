package source

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindGitHub is GitHub's scheme: X-Hub-Signature-256: sha256=<hex> where
// the hex is HMAC-SHA256 of the raw body keyed with the webhook secret. The
// legacy SHA-1 X-Hub-Signature header is ignored. GitHub signs no timestamp
// and not the delivery id: the dedup on X-GitHub-Delivery stops GitHub's
// own redeliveries, nothing stops a captured body replayed under a new
// delivery id (see docs/sources/github.md).
const KindGitHub = "github"

func init() { register(KindGitHub, newGitHub) }

// GitHub's headers.
const (
	githubDeliveryHeader = "X-GitHub-Delivery"
	githubEventHeader    = "X-GitHub-Event"
	githubHookIDHeader   = "X-GitHub-Hook-ID"
)

// githubOptions is the JSON configuration of a github source.
type githubOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
}

type githubVerifier struct {
	keys [][]byte
}

func newGitHub(name string, raw json.RawMessage) (kindVerifier, error) {
	var o githubOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	return &githubVerifier{keys: keys}, nil
}

func (v *githubVerifier) Verify(h http.Header, body []byte, _ time.Time) (inbox.Identity, error) {
	if err := verifyHubSignature(v.keys, h, body); err != nil {
		return inbox.Identity{}, err
	}
	id, err := headerIdentity(h, githubDeliveryHeader, inbox.CauseMissingEventID)
	if err != nil {
		return inbox.Identity{}, err
	}
	typ, err := headerIdentity(h, githubEventHeader, inbox.CauseInvalidEventType)
	if err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(inbox.Identity{
		EventID:   id,
		EventType: typ,
		Metadata:  headerMetadata(h, metadataHeaders[KindGitHub]...),
	})
}

// identityUnsigned implements identityBinder: X-GitHub-Delivery is not
// signed.
func (v *githubVerifier) identityUnsigned() bool { return true }

// Sign implements Signer with GitHub's headers: the signature, the
// delivery id and the event name.
func (v *githubVerifier) Sign(body []byte, eventID, eventType string, _ time.Time) http.Header {
	h := http.Header{}
	h.Set(hubSignatureHeader, hubSignature(v.keys[0], body))
	h.Set(githubDeliveryHeader, eventID)
	if eventType != "" {
		h.Set(githubEventHeader, eventType)
	}
	return h
}

// makeSample implements sampleMaker with an opened issue, with the hook headers
// GitHub sends beside the signed ones; the id and type are headers (Sign
// sets them).
func (v *githubVerifier) makeSample(now time.Time) (Sample, error) {
	_, number := randomIDs()
	body := fmt.Sprintf(`{"action":"opened","issue":{"id":%d,"number":%d,"title":"Dev sample issue","state":"open",`+
		`"user":{"login":"octocat","id":1,"type":"User"},"body":"Sent by webhookdev sample.","created_at":%q},`+
		`"repository":{"id":1296269,"name":"dev-repo","full_name":"octo-org/dev-repo","private":true},`+
		`"sender":{"login":"octocat","id":1,"type":"User"}}`,
		number, number%10000, now.UTC().Format(time.RFC3339))
	h := http.Header{}
	h.Set(githubHookIDHeader, "424242")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "1296269")
	h.Set("User-Agent", "GitHub-Hookshot/dev")
	return Sample{EventID: newUUID(), EventType: "issues", Body: []byte(body), Header: h}, nil
}

// hubSignatureHeader is the signature header GitHub and Meta share: the
// "sha256=" and hex HMAC-SHA256 of the raw body, nothing else signed.
const hubSignatureHeader = "X-Hub-Signature-256"

// verifyHubSignature checks h's X-Hub-Signature-256 over body under any
// of keys (GitHub's scheme, which Meta's webhooks use as they are).
func verifyHubSignature(keys [][]byte, h http.Header, body []byte) error {
	val, err := oneSignature(h, hubSignatureHeader)
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(val, "sha256=")
	if !ok {
		return inbox.Errorf(inbox.CauseSignatureMalformed, "the %s header must be sha256=<hex>", hubSignatureHeader)
	}
	sig, err := decodeMAC(hubSignatureHeader, hexSig, encodingHex, sha256.Size)
	if err != nil {
		return err
	}
	if !matchAny(keys, sha256.New, sig, func(w io.Writer) { w.Write(body) }) {
		return inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured secret")
	}
	return nil
}

// hubSignature is the X-Hub-Signature-256 value of body under key.
func hubSignature(key, body []byte) string {
	mac := computeMAC(key, sha256.New, func(w io.Writer) { w.Write(body) })
	return "sha256=" + encodeMAC(mac, encodingHex)
}
