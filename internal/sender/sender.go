// Package sender plays the webhook sender: it builds sample events and signs
// them exactly as each source kind's sender does, then posts them or prints
// them as a curl command. It is how `make dev` shows a working request, and
// how tests, benchmarks and the CLI send real signed deliveries.
package sender

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// Request is a signed delivery ready to send.
type Request struct {
	Source  string
	EventID string
	Header  http.Header
	Body    []byte
}

// Sign signs body for src as its sender would. eventID is carried in a
// header by kinds that put the id there and ignored by others (whose id is
// in the body). Kinds that take the event type from a header get none: use
// SignEvent for those.
func Sign(src *source.Source, body []byte, eventID string, now time.Time) (Request, error) {
	return SignEvent(src, body, eventID, "", now)
}

// SignEvent is Sign with the event type, which kinds such as github
// (X-GitHub-Event) and shopify (X-Shopify-Topic) carry in a header.
func SignEvent(src *source.Source, body []byte, eventID, eventType string, now time.Time) (Request, error) {
	h, err := src.SignEvent(body, eventID, eventType, now)
	if err != nil {
		return Request{}, err
	}
	return Request{Source: src.Name, EventID: eventID, Header: h, Body: body}, nil
}

// Sample returns a new, signed sample event for src with a random id, so
// every sample is accepted as a new event. Each kind's body is shaped like
// its sender's (an invoice payment for stripe, standard and hmac, an issue
// for github, an order for square and shopify), with the headers that
// sender sends.
func Sample(src *source.Source, now time.Time) (Request, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	number := binary.BigEndian.Uint64(b[:]) >> 12 // a positive id that JSON numbers hold exactly
	var id, typ, body string
	extra := http.Header{}
	switch src.Kind {
	case source.KindStripe:
		id = "evt_dev_" + suffix
		body = fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.payment_failed","created":%d,"livemode":false,`+
			`"data":{"object":{"id":"in_dev_%s","object":"invoice","customer":"cus_dev","amount_due":2000,"currency":"usd","attempt_count":1}}}`,
			id, now.Unix(), suffix)
	case source.KindGitHub:
		id, typ = newUUID(), "issues"
		body = fmt.Sprintf(`{"action":"opened","issue":{"id":%d,"number":%d,"title":"Dev sample issue","state":"open",`+
			`"user":{"login":"octocat","id":1,"type":"User"},"body":"Sent by webhookdev sample.","created_at":%q},`+
			`"repository":{"id":1296269,"name":"dev-repo","full_name":"octo-org/dev-repo","private":true},`+
			`"sender":{"login":"octocat","id":1,"type":"User"}}`,
			number, number%10000, now.UTC().Format(time.RFC3339))
		extra.Set("X-GitHub-Hook-ID", "424242")
		extra.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
		extra.Set("X-GitHub-Hook-Installation-Target-ID", "1296269")
		extra.Set("User-Agent", "GitHub-Hookshot/dev")
	case source.KindSquare:
		id = newUUID()
		body = fmt.Sprintf(`{"merchant_id":"MLDEVFAKE0001","type":"order.created","event_id":%q,"created_at":%q,`+
			`"data":{"type":"order","id":"ord_dev_%s","object":{"order_created":{"created_at":%q,"location_id":"LDEVFAKE0001",`+
			`"order_id":"ord_dev_%s","state":"OPEN","version":1}}}}`,
			id, now.UTC().Format(time.RFC3339Nano), suffix, now.UTC().Format(time.RFC3339Nano), suffix)
	case source.KindShopify:
		id, typ = newUUID(), "orders/create"
		body = fmt.Sprintf(`{"id":%d,"admin_graphql_api_id":"gid://shopify/Order/%d","name":"#%d","email":"dev@example.com",`+
			`"created_at":%q,"currency":"USD","financial_status":"paid","total_price":"20.00",`+
			`"line_items":[{"id":%d,"title":"Dev sample item","quantity":1,"price":"20.00","sku":"DEV-1"}]}`,
			number, number, 1000+number%9000, now.UTC().Format(time.RFC3339), number+1)
		extra.Set("X-Shopify-Event-Id", newUUID())
		extra.Set("X-Shopify-Shop-Domain", "dev-shop.myshopify.com")
		extra.Set("X-Shopify-API-Version", "2025-07")
		extra.Set("X-Shopify-Triggered-At", now.UTC().Format(time.RFC3339Nano))
	case source.KindHMAC:
		id, typ = "evt_dev_"+suffix, "invoice.payment_failed"
		doc := map[string]any{
			"created_at": now.UTC().Format(time.RFC3339),
			"data":       map[string]any{"invoice": "in_dev_" + suffix, "customer": "cus_dev", "amount_due": 2000},
		}
		idPath, typePath := src.BodyIdentityPaths()
		setPath(doc, idPath, id)
		setPath(doc, typePath, typ)
		raw, err := json.Marshal(doc)
		if err != nil {
			return Request{}, err
		}
		body = string(raw)
	default:
		id = "msg_dev_" + suffix
		body = fmt.Sprintf(`{"type":"invoice.payment_failed","timestamp":%q,"data":{"invoice":"in_dev_%s","customer":"cus_dev","amount_due":2000}}`,
			now.UTC().Format(time.RFC3339), suffix)
	}
	req, err := SignEvent(src, []byte(body), id, typ, now)
	if err != nil {
		return Request{}, err
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	return req, nil
}

// setPath sets the value at a dotted path of nested objects in doc,
// creating (or replacing) what is in the way; "" sets nothing.
func setPath(doc map[string]any, path string, value string) {
	if path == "" {
		return
	}
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := doc[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[k] = next
		}
		doc = next
	}
	doc[keys[len(keys)-1]] = value
}

// newUUID returns a random (version 4) UUID, the shape of GitHub's
// delivery ids, Square's event ids and Shopify's webhook ids.
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Post sends r to baseURL + "/webhooks/" + r.Source and returns the status
// and body of the answer.
func (r Request) Post(ctx context.Context, client *http.Client, baseURL string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL(baseURL), bytes.NewReader(r.Body))
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post %s: %w", r.Source, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// URL returns where r is posted on a receiver at baseURL.
func (r Request) URL(baseURL string) string {
	return strings.TrimRight(baseURL, "/") + "/webhooks/" + r.Source
}

// Curl returns a copy-paste shell command that posts r to baseURL.
func (r Request) Curl(baseURL string) string {
	var sb strings.Builder
	sb.WriteString("curl -sS -X POST " + shellQuote(r.URL(baseURL)))
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Header[k] {
			sb.WriteString(" \\\n  -H " + shellQuote(k+": "+v))
		}
	}
	sb.WriteString(" \\\n  --data-binary " + shellQuote(string(r.Body)))
	return sb.String()
}

// shellQuote quotes s for POSIX shells: single quotes, with embedded single
// quotes closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
