package destination

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Delivery is the event as stored, what a target is sent.
type Delivery struct {
	// Source is the configured source's name; Kind its kind.
	Source string
	Kind   string
	// Type is the event's type and EventID the sender's id for it;
	// (Source, EventID) is the deduplication key MessageID derives from.
	Type    string
	EventID string
	// ID is the stored row's id.
	ID int64
	// ReceivedAt is when the receiver stored the event.
	ReceivedAt time.Time
	// Body is the body as received, byte for byte as the sender signed it.
	Body []byte
	// Metadata holds the headers the source's kind keeps (metadata key ->
	// value), forwarded as Webhook-Inbox-Meta-* headers; content_type, when
	// kept, is the forwarded Content-Type.
	Metadata map[string]string
	// Attempt is this delivery's attempt number, from 1.
	Attempt int
}

// messageIDPrefix marks the ids this package gives consumers, so that one
// found in a consumer's logs says where it came from.
const messageIDPrefix = "whin_"

// MessageID is the stable id a consumer is given for the event of source
// and eventID: the webhook-id header, the SQS FIFO deduplication id, the
// message_id of an EventBridge detail. It derives from the deduplication
// key alone, so a retry, a replay or a re-ingest of the event gives the
// same id, and two events never share one. It is "whin_" and 32 lower-case
// hex digits (the first 16 bytes of SHA-256 over source, a NUL and the
// event id; NUL cannot occur in either, so no two keys concatenate alike):
// safe in a header, and within the 128 characters and the alphabet of an
// SQS deduplication id.
func MessageID(source, eventID string) string {
	h := sha256.New()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(eventID))
	return messageIDPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}
