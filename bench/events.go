package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// bodySize is the size of every generated event body: a Stripe
// invoice.payment_failed event padded to exactly 1 KiB.
const bodySize = 1024

// sourceName is the one configured source of the bench; its kind is stripe.
const sourceName = "stripe"

// benchSecret signs every delivery. It guards nothing (loopback only).
const benchSecret = "whsec_bench_4f1c2a9e7b3d5f60a1b2c3"

// sourcesDoc is the receiver's configuration: one Stripe source.
var sourcesDoc = `{"sources":{"` + sourceName + `":{"kind":"stripe","secrets":["` + benchSecret + `"]}}}`

// eventType is the type of every generated event.
const eventType = "invoice.payment_failed"

// createdBase is the "created" time of generated events: fixed, so bodies
// are a pure function of the seed and the event's number (the signature's
// timestamp is the real time of sending, as Stripe's is).
const createdBase = 1767225600 // 2026-01-01T00:00:00Z

// Random streams of the generator: every figure draws from its own, so
// adding a stage or a run never changes another's events.
const (
	streamNew       = 1 << 32 // + run<<16 + worker: new events of the receiver
	streamDuplicate = 2 << 32 // + index: the duplicate set
	streamDrain     = 3 << 32 // + index: the drain's events
	streamPick      = 4 << 32 // + run<<16 + worker: which duplicate to redeliver
	streamLatency   = 5 << 32 // + index: the latency stage's events
)

// dupIDBase is the first id of the duplicate set. Its ids are decimal
// numbers, which pgbench's \set can draw too, so both sides redeliver the
// very same stored rows.
const dupIDBase = 1_000_000_000

// newRand returns the generator of one stream.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// token returns n random base62 characters.
func token(r *rand.Rand, n int) string {
	var sb strings.Builder
	sb.Grow(n)
	for range n {
		sb.WriteByte(base62[r.IntN(len(base62))])
	}
	return sb.String()
}

// stripeID returns a new Stripe-style event id: evt_ and 24 characters.
func stripeID(r *rand.Rand) string { return "evt_" + token(r, 24) }

// dupID returns the id of the i-th event of the duplicate set.
func dupID(i int) string { return strconv.Itoa(dupIDBase + i) }

// stripeBody returns a Stripe invoice.payment_failed event with this id,
// its other fields drawn from r, padded to exactly bodySize bytes.
func stripeBody(id string, r *rand.Rand) []byte {
	amount := 500 + r.IntN(99500)
	customer := "cus_" + token(r, 14)
	invoice := "in_" + token(r, 24)
	sub := "sub_" + token(r, 24)
	created := createdBase + r.IntN(30*86400)
	head := fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2025-06-30.basil","created":%d,`+
		`"data":{"object":{"id":%q,"object":"invoice","account_country":"US","amount_due":%d,"amount_paid":0,`+
		`"amount_remaining":%d,"attempt_count":%d,"attempted":true,"billing_reason":"subscription_cycle",`+
		`"collection_method":"charge_automatically","currency":"usd","customer":%q,"customer_email":"%s@example.com",`+
		`"hosted_invoice_url":"https://invoice.stripe.com/i/acct_1Bench/test_%s","lines":{"object":"list","data":[{"id":"il_%s",`+
		`"amount":%d,"currency":"usd","period":{"start":%d,"end":%d},"quantity":1}],"has_more":false},`+
		`"status":"open","subscription":%q,"metadata":{"note":"`,
		id, created, invoice, amount, amount, 1+r.IntN(4), customer, strings.ToLower(token(r, 10)),
		token(r, 32), token(r, 24), amount, created-30*86400, created, sub)
	tail := `"}}},"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"` + eventType + `"}`
	pad := bodySize - len(head) - len(tail)
	if pad < 0 {
		pad = 0 // the fields above are bounded well under bodySize
	}
	return []byte(head + token(r, pad) + tail)
}

// dupBody returns the body of the i-th event of the duplicate set.
func dupBody(seed uint64, i int) []byte {
	return stripeBody(dupID(i), newRand(seed, streamDuplicate+uint64(i)))
}

// benchSource returns the configured Stripe source, for signing.
func benchSource() (*source.Source, *source.Set, error) {
	set, err := source.Parse([]byte(sourcesDoc))
	if err != nil {
		return nil, nil, fmt.Errorf("bench sources: %w", err)
	}
	src, ok := set.Lookup(sourceName)
	if !ok {
		return nil, nil, fmt.Errorf("bench sources: no %s source", sourceName)
	}
	return src, set, nil
}

// sha256Hex returns the bytea hex literal of a body's hash, as pgbench
// passes it.
func sha256Hex(body []byte) string {
	sum := sha256.Sum256(body)
	return `\x` + hex.EncodeToString(sum[:])
}
