package source

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// KindShopify is Shopify's scheme: X-Shopify-Hmac-Sha256 is the base64
// HMAC-SHA256 of the raw body keyed with the app's client secret (or the
// store's webhook signing secret for webhooks made in the admin). Shopify
// signs no timestamp (X-Shopify-Triggered-At is not signed) and no header.
// The event id is X-Shopify-Event-Id, which Shopify's guide names as the
// key that identifies duplicates (one event delivered to several
// subscriptions carries it on each), falling back to X-Shopify-Webhook-Id
// when it is absent; the webhook id is kept in metadata either way. See
// docs/sources/shopify.md.
const KindShopify = "shopify"

func init() { register(KindShopify, newShopify) }

// Shopify's headers.
const (
	shopifySignatureHeader   = "X-Shopify-Hmac-Sha256"
	shopifyWebhookIDHeader   = "X-Shopify-Webhook-Id"
	shopifyTopicHeader       = "X-Shopify-Topic"
	shopifyEventIDHeader     = "X-Shopify-Event-Id"
	shopifyShopDomainHeader  = "X-Shopify-Shop-Domain"
	shopifyAPIVersionHeader  = "X-Shopify-Api-Version"
	shopifyTriggeredAtHeader = "X-Shopify-Triggered-At"
)

// shopifyMetadata is what is kept beside the event, from headers: the
// X-Shopify-Event-Id shared by every subscription's delivery of one event
// (also the event id when present), the X-Shopify-Webhook-Id of this
// delivery, the shop, the payload's API version and when the event
// happened.
var shopifyMetadata = [][2]string{
	{"shopify_event_id", shopifyEventIDHeader},
	{"shopify_webhook_id", shopifyWebhookIDHeader},
	{"shopify_shop_domain", shopifyShopDomainHeader},
	{"shopify_api_version", shopifyAPIVersionHeader},
	{"shopify_triggered_at", shopifyTriggeredAtHeader},
}

// shopifyOptions is the JSON configuration of a shopify source.
type shopifyOptions struct {
	Kind    string   `json:"kind"`
	Secrets []string `json:"secrets"`
}

type shopifyVerifier struct {
	keys [][]byte
}

func newShopify(name string, raw json.RawMessage) (kindVerifier, error) {
	var o shopifyOptions
	if err := decodeOptions(name, raw, &o); err != nil {
		return nil, err
	}
	keys, err := rawSecrets(name, o.Secrets)
	if err != nil {
		return nil, err
	}
	return &shopifyVerifier{keys: keys}, nil
}

func (v *shopifyVerifier) Verify(h http.Header, body []byte, _ time.Time) (inbox.Identity, error) {
	val, err := oneSignature(h, shopifySignatureHeader)
	if err != nil {
		return inbox.Identity{}, err
	}
	sig, err := decodeMAC(shopifySignatureHeader, val, encodingBase64, sha256.Size)
	if err != nil {
		return inbox.Identity{}, err
	}
	if !matchAny(v.keys, sha256.New, sig, func(w io.Writer) { w.Write(body) }) {
		return inbox.Identity{}, inbox.Errorf(inbox.CauseSignatureMismatch, "the signature matches no configured secret")
	}
	id, err := headerIdentity(h, shopifyEventIDHeader, inbox.CauseMissingEventID)
	if err != nil {
		return inbox.Identity{}, err
	}
	if id == "" {
		if id, err = headerIdentity(h, shopifyWebhookIDHeader, inbox.CauseMissingEventID); err != nil {
			return inbox.Identity{}, err
		}
	}
	topic, err := headerIdentity(h, shopifyTopicHeader, inbox.CauseInvalidEventType)
	if err != nil {
		return inbox.Identity{}, err
	}
	return checkIdentity(inbox.Identity{
		EventID:   id,
		EventType: topic,
		Metadata:  headerMetadata(h, metadataHeaders[KindShopify]...),
	})
}

// identityUnsigned implements identityBinder: Shopify signs no header.
func (v *shopifyVerifier) identityUnsigned() bool { return true }

// Sign implements Signer with Shopify's signature, event id and topic
// headers. (The other X-Shopify-* headers are not signed; the sample
// puts them in Sample.Header, the webhook id among them.)
func (v *shopifyVerifier) Sign(body []byte, eventID, eventType string, _ time.Time) http.Header {
	mac := computeMAC(v.keys[0], sha256.New, func(w io.Writer) { w.Write(body) })
	h := http.Header{}
	h.Set(shopifySignatureHeader, encodeMAC(mac, encodingBase64))
	h.Set(shopifyEventIDHeader, eventID)
	if eventType != "" {
		h.Set(shopifyTopicHeader, eventType)
	}
	return h
}

// makeSample implements sampleMaker with a created order, shaped like Shopify's
// orders/create payload, with the unsigned X-Shopify-* headers Shopify
// sends; the id and topic are headers (Sign sets them).
func (v *shopifyVerifier) makeSample(now time.Time) (Sample, error) {
	_, number := randomIDs()
	body := fmt.Sprintf(`{"id":%d,"admin_graphql_api_id":"gid://shopify/Order/%d","name":"#%d","email":"dev@example.com",`+
		`"created_at":%q,"currency":"USD","financial_status":"paid","total_price":"20.00",`+
		`"line_items":[{"id":%d,"title":"Dev sample item","quantity":1,"price":"20.00","sku":"DEV-1"}]}`,
		number, number, 1000+number%9000, now.UTC().Format(time.RFC3339), number+1)
	h := http.Header{}
	h.Set(shopifyWebhookIDHeader, newUUID())
	h.Set(shopifyShopDomainHeader, "dev-shop.myshopify.com")
	h.Set(shopifyAPIVersionHeader, "2025-07")
	h.Set(shopifyTriggeredAtHeader, now.UTC().Format(time.RFC3339Nano))
	return Sample{EventID: newUUID(), EventType: "orders/create", Body: []byte(body), Header: h}, nil
}
