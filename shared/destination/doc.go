// Package destination delivers one stored event to one configured target:
// an HTTPS endpoint (the body forwarded byte for byte, signed with
// Standard Webhooks), an SQS queue, or an EventBridge bus. It holds no
// database and no state between deliveries: the processor calls
// Sender.Deliver for each (event, route) it owns, and a forwarder outside
// the VPC can call it the same way; whoever calls it records the Result
// (Delivered, Retry with an optional wait, or Permanent) as an attempt.
//
// What a target is, as users write it in the sources document's routes, is
// Target; Validate says, naming the field, what is wrong with one. Every
// id a consumer sees is MessageID, derived from the event's deduplication
// key, so that a retry, a replay or a re-ingest of the same event carries
// the same id and the consumer can deduplicate.
//
// Forwarding refuses, at connect time, every address a webhook consumer on
// the internet cannot have (loopback, private, link-local and the instance
// metadata address, CGNAT, multicast, ...), so that a route cannot turn the
// inbox into a way into the VPC; Config.AllowPrivate lifts that for
// consumers inside the VPC or on a developer's machine. A Result's text is
// safe to log: it never holds a body sent, a secret, a header value or a
// URL's path and query (where webhook URLs often carry their token).
//
// docs/destinations.md describes the targets, the headers, the signature,
// how a delivery's outcome is classified and the SSRF rules.
package destination
