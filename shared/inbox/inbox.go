// Package inbox holds webhook-inbox's domain: the delivery a receiver
// accepts, and the cause codes that say why anything was refused or failed.
// It imports nothing else of the project, so every package can share these
// names; adapters (HTTP, Lambda, Postgres) map them to their own outcomes.
package inbox

import (
	"errors"
	"fmt"
)

// Cause is a stable, machine-readable reason for a refusal or failure. It is
// what responses, log lines (key "cause") and metrics carry: operators and
// senders search for it, so existing values never change meaning.
type Cause string

// Causes of refused requests and failed operations.
const (
	// CauseUnknownSource: the URL names no configured source.
	CauseUnknownSource Cause = "unknown_source"
	// CauseNotFound: the path is not a webhook route at all.
	CauseNotFound Cause = "not_found"
	// CauseInvalidRequest: the request line itself is not valid HTTP (the
	// Lambda adapter's refusal of an event it cannot turn into a request).
	CauseInvalidRequest Cause = "invalid_request"
	// CauseMethodNotAllowed: webhooks are delivered with POST only.
	CauseMethodNotAllowed Cause = "method_not_allowed"
	// CauseSignatureMissing: the request carries no signature header.
	CauseSignatureMissing Cause = "signature_missing"
	// CauseSignatureMalformed: the signature header cannot be parsed.
	CauseSignatureMalformed Cause = "signature_malformed"
	// CauseSignatureMismatch: no configured secret produced any of the
	// signatures sent: wrong secret, or a body altered on the way.
	CauseSignatureMismatch Cause = "signature_mismatch"
	// CauseTimestampOutOfTolerance: the signature is authentic but its
	// timestamp is too old (a replay) or too far in the future.
	CauseTimestampOutOfTolerance Cause = "timestamp_out_of_tolerance"
	// CausePayloadTooLarge: the body exceeds the configured maximum.
	CausePayloadTooLarge Cause = "payload_too_large"
	// CauseUnreadableBody: the body could not be read (client went away).
	CauseUnreadableBody Cause = "unreadable_body"
	// CauseUnparsableBody: the source kind needs JSON fields and the body is
	// not JSON (or not an object).
	CauseUnparsableBody Cause = "unparsable_body"
	// CauseMissingEventID: no usable event id: absent, empty, too long, or
	// not valid text. The id is the deduplication key, so it is required.
	CauseMissingEventID Cause = "missing_event_id"
	// CauseInvalidEventType: the event type is too long or not valid text.
	CauseInvalidEventType Cause = "invalid_event_type"
	// CauseInvalidEvent: the database refused the event's values as data
	// (not an outage): retrying the same delivery cannot succeed.
	CauseInvalidEvent Cause = "invalid_event"
	// CauseSuspectedReplay: an authentic body already stored for the
	// source under another event id, from a source whose id the signature
	// does not cover (github, shopify, hmac with an unsigned id header):
	// a captured delivery posted again under a fresh id (or with another
	// type). It is answered 200, like a duplicate, never stored as a new
	// event nor processed, and recorded for the stored event.
	CauseSuspectedReplay Cause = "suspected_replay"
	// CausePayloadMismatch: a redelivery of a stored event id with another
	// body; the first body stays, the event is a duplicate (recorded).
	CausePayloadMismatch Cause = "payload_mismatch"
	// CauseDatabaseUnavailable: the event could not be made durable; the
	// sender must retry, so this maps to 503.
	CauseDatabaseUnavailable Cause = "database_unavailable"
	// CauseInternal: a bug; details are logged, never sent.
	CauseInternal Cause = "internal"
	// CauseEndpointTokenMismatch: the source has an endpoint token and the
	// request's path carries another one, or none where the source's
	// untokened path is disabled. Logged and recorded; the answer is
	// CauseUnauthenticated.
	CauseEndpointTokenMismatch Cause = "endpoint_token_mismatch"
	// CauseUnauthenticated is the one answer to a request that is not
	// authenticated, whatever the reason (unknown source, endpoint token,
	// signature, timestamp), so an answer never tells which source names
	// exist. The precise cause is in the log line, the metrics and
	// webhook_rejections, for operators.
	CauseUnauthenticated Cause = "unauthenticated"
	// CauseHandshake: not a refusal but a sender's endpoint verification
	// (Slack's url_verification, Zoom's endpoint.url_validation, Meta's
	// hub.challenge), authenticated and answered as the sender requires;
	// nothing is stored. Recorded in webhook_rejections like a refusal,
	// so an operator sees when a sender verified the endpoint.
	CauseHandshake Cause = "handshake"
	// CauseQuarantineFull: a delivery refused for its signature or its
	// signed time was not kept in quarantine, because its source holds
	// as many as it may (WEBHOOK_QUARANTINE_CAP) or the receiver keeps
	// no more this second: logged and counted, never answered.
	CauseQuarantineFull Cause = "quarantine_full"
	// CauseQuarantineFailed: keeping a refused delivery in quarantine
	// failed (the database); the refusal's answer is unchanged.
	CauseQuarantineFailed Cause = "quarantine_failed"
)

// Causes of the processor, recorded in an event's error history (key
// "cause") and logged.
const (
	// CauseHandlerFailed: the handler returned an error; retried.
	CauseHandlerFailed Cause = "handler_failed"
	// CauseHandlerPrivilege: the handler's statement was refused for a
	// privilege the processor's role lacks (SQLSTATE 42501): a table
	// missing from its package's processor.HandlerSchema Grants. Retried like a
	// failure, since the deploy that declares it fixes the events still
	// in their retry window; the error names the table and the entry to
	// add.
	CauseHandlerPrivilege Cause = "handler_privilege"
	// CauseHandlerPanic: the handler panicked; retried like a failure.
	CauseHandlerPanic Cause = "handler_panic"
	// CauseHandlerTimeout: the handler (or its commit) outlived the
	// processor's handler timeout; retried.
	CauseHandlerTimeout Cause = "handler_timeout"
	// CausePermanent: the handler returned a permanent error; dead-lettered
	// at once.
	CausePermanent Cause = "permanent_error"
	// CauseNoHandler: no handler matched, under the retry or dead_letter
	// unhandled policy.
	CauseNoHandler Cause = "no_handler"
	// CauseLeaseExpired: an attempt started and never finished: its
	// processor was killed, timed out or lost the database. Recorded by the
	// processor that finds its claim past the lease.
	CauseLeaseExpired Cause = "lease_expired"
	// CauseMaxAttempts: an event claimed with no attempt left (the maximum
	// was lowered since its last one): dead-lettered without running.
	CauseMaxAttempts Cause = "max_attempts"
	// CauseLeaseLost: the processor's claim was recovered by another
	// processor after its lease passed; its work on the claim's events was
	// rolled back (logged only).
	CauseLeaseLost Cause = "lease_lost"
	// CauseCommitFailed: the transaction holding the handler's work failed
	// to commit (a deferred constraint, a serialization failure, the
	// connection lost); retried.
	CauseCommitFailed Cause = "commit_failed"
	// CauseWakeFailed: an event is stored but the wake-up that starts the
	// processor for it (or arms a later one) failed (shared/wake): the
	// event waits for the next wake-up or the sweep. Logged only; the
	// sender's answer is unchanged.
	CauseWakeFailed Cause = "wake_failed"
	// CauseBodyOverBudget: the event's body alone is larger than the
	// processor's body budget (PROCESSOR_BODY_BUDGET), so it can never be
	// held to run: dead-lettered at once.
	CauseBodyOverBudget Cause = "body_over_budget"
	// CauseSourceSilent: a source with a silent_after setting has not
	// delivered for longer than it (logged by the processor's runs, which
	// count such sources in SourcesSilent). Nothing is wrong in the stack:
	// look at the sender's side.
	CauseSourceSilent Cause = "source_silent"
)

// Causes of the receiver's re-reads of its sources document (logged
// only: no request is answered by them).
const (
	// CauseSourcesReloadRefused: the sources document read again is not
	// valid (source.Parse refused it): the receiver keeps the sources it
	// has, and its alarm fires.
	CauseSourcesReloadRefused Cause = "sources_reload_refused"
	// CauseSourcesReloadFailed: the sources document could not be read
	// again (its file, S3 copy or secret): the receiver keeps the sources
	// it has and tries at the next re-read.
	CauseSourcesReloadFailed Cause = "sources_reload_failed"
)

// Causes of the archiver and of reading bodies back.
const (
	// CauseArchiveStoreUnavailable: S3 could not be reached or did not
	// serve the request (refused, timed out, 5xx, throttled). Nothing was
	// cleared; the next run retries.
	CauseArchiveStoreUnavailable Cause = "archive_store_unavailable"
	// CauseArchiveStoreFailed: S3 refused the request (access denied, no
	// such bucket, checksum mismatch...): a configuration or bug to fix,
	// not an outage to wait out. Nothing was cleared.
	CauseArchiveStoreFailed Cause = "archive_store_failed"
	// CauseArchiveCorrupt: archived bytes do not match the event (wrong
	// event, bad gzip or JSON, SHA-256 mismatch).
	CauseArchiveCorrupt Cause = "archive_corrupt"
	// CauseEventNotFound: no event has that source and event id.
	CauseEventNotFound Cause = "event_not_found"
	// CauseEventExpunged: the event's body was erased on request.
	CauseEventExpunged Cause = "event_expunged"
	// CauseBodyExpired: the event's body is past the configured body
	// retention and was removed (its row, key and hash stay).
	CauseBodyExpired Cause = "body_expired"
)

// Causes of the operator API (shared/operations, shared/operatorapi): what
// an operator asked that was refused, and why.
const (
	// CauseInvalidArgument: a parameter of the request is not valid (an
	// unknown state, a window that ends before it starts, a limit out of
	// range, an empty selection for an action).
	CauseInvalidArgument Cause = "invalid_argument"
	// CauseReadOnly: an action asked of a read-only operator API or
	// console; counting what it would change (a dry run) is allowed.
	CauseReadOnly Cause = "read_only"
	// CauseForbidden: the caller may not make this request: the
	// operator's AWS identity may not invoke the operator function asked
	// (IAM refused it before the function ran: the identity lacks the
	// stack's OperatorActPolicy, or OperatorReadPolicy), or a console
	// form came without its session's CSRF token or from another origin.
	CauseForbidden Cause = "forbidden"
	// CauseMisdirectedRequest: a request to the console named a Host
	// that is not the console's own address (a DNS name rebound to a
	// loopback address, say): refused before anything else.
	CauseMisdirectedRequest Cause = "misdirected_request"
	// CauseTooManyAttempts: too many wrong access tokens came to the
	// console from one address: it refuses every token from there,
	// the right one included, until the Retry-After has passed.
	CauseTooManyAttempts Cause = "too_many_attempts"
	// CauseCountChanged: an action confirmed for a count of events would
	// now change another number of them (something died, was requeued or
	// processed in between): nothing was changed; count again.
	CauseCountChanged Cause = "count_changed"
	// CauseConfirmationMismatch: what the operator typed to confirm an
	// action (the console's expunge asks for the event's id again) does
	// not name what the action would change: nothing was changed.
	CauseConfirmationMismatch Cause = "confirmation_mismatch"
	// CauseArchiveNotConfigured: the archive's settings (its bucket) are
	// not given where the request was served, so an archived body, an
	// expunge or an archive run cannot be done there.
	CauseArchiveNotConfigured Cause = "archive_not_configured"
	// CauseBodyCorrupt: a body stored in Postgres does not match the hash
	// recorded when it was received.
	CauseBodyCorrupt Cause = "body_corrupt"
	// CauseAlreadyPaused: a pause of a source or a handler that is
	// already paused: nothing was changed (the pause in place keeps its
	// operator and reason).
	CauseAlreadyPaused Cause = "already_paused"
	// CauseNotPaused: a resume of a source or a handler that is not
	// paused: nothing was changed.
	CauseNotPaused Cause = "not_paused"
	// CauseSourcesNotConfigured: a re-ingest needs the sources document
	// (to verify deliveries again with the current secrets), and none is
	// given where the request was served.
	CauseSourcesNotConfigured Cause = "sources_not_configured"
	// CauseQuarantineNotFound: no quarantined delivery has that id.
	CauseQuarantineNotFound Cause = "quarantine_not_found"
)

// Error is an error with a cause code. Message is safe to show to the
// sender; Err (if any) is the underlying error, for logs only.
type Error struct {
	Cause   Cause
	Message string
	Err     error
}

// Error returns the cause and message, and the wrapped error if any.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Cause, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Cause, e.Message)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given cause and a formatted message.
func Errorf(cause Cause, format string, args ...any) *Error {
	return &Error{Cause: cause, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with the given cause and message wrapping err.
func WrapError(cause Cause, err error, message string) *Error {
	return &Error{Cause: cause, Message: message, Err: err}
}

// CauseOf returns the cause of the first *Error in err's chain, or
// CauseInternal when there is none: an error without a cause is a bug.
func CauseOf(err error) Cause {
	var e *Error
	if errors.As(err, &e) {
		return e.Cause
	}
	return CauseInternal
}

// MessageOf returns the sender-safe message of the first *Error in err's
// chain, or a generic text that leaks nothing.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Limits on the identity of an event. They bound what a sender can make us
// store in indexed columns; the schema enforces the same bounds.
const (
	MaxEventIDBytes   = 255
	MaxEventTypeBytes = 255
	MaxSourceNameLen  = 64
)

// Identity is who an event is, as its sender documents it: the id the
// unique constraint deduplicates on, and its type.
type Identity struct {
	EventID   string
	EventType string
	// Metadata holds sender-specific identifiers kept beside the event
	// (e.g. "shopify_event_id"); never part of the deduplication key.
	Metadata map[string]string
}
