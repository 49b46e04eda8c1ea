package console

import "github.com/webhook-inbox/webhook-inbox/shared/inbox"

// What the refusals page says of each cause: the console's presentation,
// kept here rather than in the API, which reports causes as codes.

// causeNote is what a refusal cause means and what to do about it.
type causeNote struct {
	Means, Do string
}

// causeNotes explains the causes the receiver records in
// webhook_rejections (docs/operations.md, "A sender is refused after a
// secret roll", and docs/security.md). A cause not here is shown as
// recorded, without an explanation.
var causeNotes = map[inbox.Cause]causeNote{
	inbox.CauseUnknownSource: {
		"The URL names no configured source: a typo in the sender's URL, or a source removed or renamed while the sender still delivers. Names that are no source are counted under the source (unknown); the message holds the name requested.",
		"Compare the sender's URL with the sources document (webhookctl sources check); add the source back, or have the sender fix its URL."},
	inbox.CauseEndpointTokenMismatch: {
		"The source has an endpoint token and the URL carries another one, or none while the source's untokened path is closed (untokened_path: false).",
		"Give the sender the URL with the source's current endpoint token; during a token change, open untokened_path until every sender uses the new URL (docs/security.md, An endpoint nobody can guess)."},
	inbox.CauseSignatureMissing: {
		"The request carries no signature header: a proxy strips it, or the sender is not configured to sign.",
		"Check the sender's webhook settings (signing on) and any proxy between it and the receiver."},
	inbox.CauseSignatureMalformed: {
		"The signature header is there but cannot be parsed for the source's kind: the wrong kind configured, or a proxy altering the header.",
		"Check the source's kind in the sources document against the sender's documentation (docs/sources/)."},
	inbox.CauseSignatureMismatch: {
		"No configured secret produced the signature sent: the sender signs with a secret you do not have (a secret roll), or the body was altered on the way.",
		"Get the sender's new secret and put it beside the old one in the source's secrets, store the document, and let new receivers read it (docs/operations.md, A sender is refused after a secret roll)."},
	inbox.CauseTimestampOutOfTolerance: {
		"The signature is good, but its timestamp is outside tolerance_seconds: the sender's (or a proxy's) clock is off, a retry was queued for long, or someone replays a captured delivery.",
		"Ask the sender about its clock and its retry queue; raise tolerance_seconds only if late retries are expected (at most one hour)."},
	inbox.CausePayloadTooLarge: {
		"The body is larger than WEBHOOK_MAX_BODY_BYTES.",
		"If the sender's events are legitimately this large, raise WEBHOOK_MAX_BODY_BYTES for the receiver; otherwise find out what the sender posts."},
	inbox.CauseUnreadableBody: {
		"The body could not be read: the client went away or the connection broke mid-request.",
		"Usually transient: the sender retries. A steady stream points at the network between the sender and the receiver."},
	inbox.CauseUnparsableBody: {
		"The source's kind reads fields from a JSON body and the body is not a JSON object.",
		"Check the source's kind against what the sender posts (a form-encoded sender, a wrong kind)."},
	inbox.CauseMissingEventID: {
		"The delivery has no usable event id (absent, empty, too long, or not valid text); the id is the deduplication key, so it is required.",
		"Check the source's kind and, for hmac sources, its event id header or field against the sender's deliveries."},
	inbox.CauseInvalidEventType: {
		"The event type is too long or not valid text.",
		"Check what the sender sends as its type; the receiver stores at most 255 bytes."},
	inbox.CauseInvalidEvent: {
		"The database refused the event's values as data (not an outage): retrying the same delivery cannot succeed.",
		"Find the request in the receiver's log by its request id and report it: it is a bug or a sender sending what no check foresaw."},
	inbox.CauseDatabaseUnavailable: {
		"The event could not be made durable: the database did not answer (503; the sender retries).",
		"See the database's health and the runbook of a database failover in docs/operations.md."},
	inbox.CauseInternal: {
		"A bug in the receiver (503; the sender retries). Details are in the receiver's log, never sent.",
		"Follow docs/operations.md, A bug: 503 internal: find the log line by its request id."},
	inbox.CauseNotFound: {
		"The path is not a webhook route at all: a scanner, or a sender with a wrong URL.",
		"Nothing, unless a real sender is among them: then fix its URL (/webhooks/<source>)."},
	inbox.CauseMethodNotAllowed: {
		"A request with another method than POST or GET: a scanner, or a client that is not a webhook sender.",
		"Nothing, unless a real sender is among them."},
	inbox.CauseUnauthenticated: {
		"A GET that is no authenticated handshake: someone opening the URL in a browser, a scanner, or a sender verifying the endpoint of a source whose kind has no handshake.",
		"Nothing, unless a sender's endpoint verification fails: check the source's kind and, for meta, its verify_tokens (docs/sources/meta.md)."},
	inbox.CauseHandshake: {
		"Not a refusal: a sender verified the endpoint (Slack's url_verification, Zoom's endpoint.url_validation, Meta's hub.challenge); the request was authenticated, answered as the sender requires, and nothing was stored.",
		"Nothing: Zoom verifies again every 72 hours; a new one appears whenever a sender's endpoint is set or changed."},
	inbox.CauseInvalidRequest: {
		"The request could not be turned into an HTTP request (the Lambda adapter's refusal).",
		"Look for the request id in the receiver's log."},
}

// attemptCauses are the causes an attempt fails with, which the forms
// that filter by the last attempt's cause suggest (a datalist: any cause
// may be typed, and operations checks it).
var attemptCauses = []string{
	string(inbox.CauseHandlerFailed), string(inbox.CauseHandlerTimeout), string(inbox.CauseHandlerPanic),
	string(inbox.CauseHandlerPrivilege), string(inbox.CausePermanent), string(inbox.CauseNoHandler),
	string(inbox.CauseLeaseExpired), string(inbox.CauseCommitFailed), string(inbox.CauseMaxAttempts),
}
