// Package receiver is the webhook endpoint as a plain http.Handler:
// POST /webhooks/{source}, and POST /webhooks/{source}/{token} for a
// source with an endpoint token; GET on both only for the endpoint
// verification of a kind that has one (source.Handshaker). It reads the raw body within a bound,
// authenticates it with the source's verifier, and stores it once. It
// answers 2xx only after the row is committed, so a sender never stops
// retrying an event that is not durable. A request that is not
// authenticated gets one answer whatever the source name (401
// unauthenticated), and no answer carries text from the request.
package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/metrics"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// EventStore is what the receiver needs of storage; *storage.Store is it.
type EventStore interface {
	EventInsert(ctx context.Context, p storage.EventInsertParams) (storage.EventInsertResult, error)
	PayloadMismatchInsert(ctx context.Context, m inbox.PayloadMismatch) (bool, error)
	RejectionInsert(ctx context.Context, r inbox.Rejection, capacity int) error
	SourceActivityRecord(ctx context.Context, sources []storage.SourceRecord, now time.Time) error
	QuarantineInsert(ctx context.Context, q inbox.Quarantined, capacity int) (bool, error)
}

// Defaults for Config's zero values.
const (
	// DefaultMaxBodyBytes is 1 MiB: far above the events of Stripe, Square,
	// Shopify and Standard Webhooks senders, and well under Lambda's 6 MB
	// request limit (which base64 encoding shrinks to about 4.5 MB).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultStoreTimeout bounds the insert, so a stuck database turns into
	// a 503 long before API Gateway's 30 s limit or the sender's timeout.
	DefaultStoreTimeout = 5 * time.Second
)

// Waker starts the processor after a receipt (wake.Waker).
type Waker interface {
	Wake(ctx context.Context) error
}

// Config configures a Handler: settings only (ConfigFromEnv reads them);
// what it works on is its Deps.
type Config struct {
	// MaxBodyBytes is the largest body accepted; larger ones get 413.
	MaxBodyBytes int64
	// StoreTimeout bounds the database work of one request.
	StoreTimeout time.Duration
	// SourcesRefresh is how often Deps.ReadSources reads the sources
	// document again, checked at the start of each request: 0 reads it
	// only after a burst of refusals. ConfigFromEnv's default
	// is DefaultSourcesRefresh; a zero Config's is 0.
	SourcesRefresh time.Duration
	// QuarantineCap is how many deliveries refused for their signature or
	// signed time each source keeps in quarantine (quarantine.go): 0 is
	// storage.DefaultQuarantineCap, below 0 keeps none.
	QuarantineCap int
	// Metrics makes each outcome's log line a CloudWatch EMF record; Off
	// leaves plain log lines. Its clock is Deps.Clock.
	Metrics metrics.Emitter
}

// rejectionSampleInterval is the least time between two rejection records
// of one source and cause in webhook_rejections; the ones in between are
// counted in the next record. One second, so that a flood of forged
// requests cannot become a flood of database writes.
const rejectionSampleInterval = time.Second

// Clock is where the receiver reads the time: signature timestamps are
// checked against it, and rejection records sampled by it. A dependency,
// so that a test checks a signature's window without waiting.
type Clock interface {
	Now() time.Time
}

// Deps is what a Handler works on and reports to.
type Deps struct {
	// Sources are the configured senders (source.Load). Required.
	Sources *source.Set
	// ReadSources, when set, reads the sources document again from where
	// Sources came from (secrets.SourcesReader): on Config.SourcesRefresh's
	// interval and after a burst of one name's unauthenticated refusals, a
	// changed document that parses replaces Sources for new requests,
	// and one that does not is refused (reload.go). nil: Sources never
	// change.
	ReadSources func(context.Context) ([]byte, error)
	// Store is where events are stored (*storage.Store). Required.
	Store EventStore
	// Wake, when set, is called after each stored event and each
	// duplicate (whose first delivery's wake-up may have been lost), so
	// that the processor runs without polling. A failure is logged; the
	// answer stays what the commit made it.
	Wake Waker
	// Logger receives one JSON line per request outcome; nil is
	// slog.Default().
	Logger *slog.Logger
	// Clock is the time signatures are checked at; nil is the system
	// clock.
	Clock Clock
	// RequestID returns the id to log for a request (the Lambda adapter's
	// API Gateway request id); nil is the X-Request-Id header.
	RequestID func(*http.Request) string
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Handler serves POST /webhooks/{source} and /webhooks/{source}/{token}.
// Close it to write the rejection records still queued.
type Handler struct {
	cfg        Config
	deps       Deps
	mux        *http.ServeMux
	sampler    *sampler
	rejections *rejectionWriter
	// quarantined keeps refused deliveries; nil when the quarantine is
	// off.
	quarantined *quarantineWriter
	// sources is Deps.Sources, as re-reads replace it.
	sources *sourcesReloader
	// activity is the sources' deliveries not yet recorded (activity.go).
	activity activity
}

// New returns a Handler for cfg over deps.
func New(cfg Config, deps Deps) (*Handler, error) {
	if deps.Sources == nil {
		return nil, errors.New("receiver: no sources configured")
	}
	if deps.Store == nil {
		return nil, errors.New("receiver: no store configured")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	if deps.RequestID == nil {
		deps.RequestID = func(r *http.Request) string { return r.Header.Get("X-Request-Id") }
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	cfg.Metrics.Now = deps.Clock.Now
	for _, name := range deps.Sources.Names() {
		if src, _ := deps.Sources.Lookup(name); src.Warning != "" {
			deps.Logger.Warn("source accepts a risk", "source", name, "warning", src.Warning)
		}
	}
	h := &Handler{cfg: cfg, deps: deps, mux: http.NewServeMux(), sampler: newSampler(rejectionSampleInterval),
		rejections: newRejectionWriter(deps.Store, deps.Logger, cfg.Metrics),
		sources:    newSourcesReloader(deps.Sources, deps.ReadSources, max(cfg.SourcesRefresh, 0), deps.Clock, deps.Logger, cfg.Metrics)}
	if cfg.QuarantineCap >= 0 {
		h.quarantined = newQuarantineWriter(deps.Store, cfg.QuarantineCap, deps.Logger, cfg.Metrics)
	}
	h.mux.HandleFunc("/webhooks/{source}", h.serveWebhook)
	h.mux.HandleFunc("/webhooks/{source}/{token}", h.serveWebhook)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.refuse(w, r, "", inbox.Errorf(inbox.CauseNotFound, "no such route"))
	})
	return h, nil
}

// ServeHTTP routes the request. Every answer is nosniff, the mux's own
// 307 to a cleaned path included (it echoes the path, in an HTML body for
// a GET): no browser may read an answer as anything but its Content-Type.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// response is the JSON body of every answer.
type response struct {
	Status  string      `json:"status"`
	ID      int64       `json:"id,omitempty"`
	Cause   inbox.Cause `json:"cause,omitempty"`
	Message string      `json:"message,omitempty"`
}

// Statuses of the response body.
const (
	StatusAccepted    = "accepted"
	StatusDuplicate   = "duplicate"
	StatusRejected    = "rejected"
	StatusUnavailable = "unavailable"
	StatusError       = "error"
)

// httpStatus maps each cause to its HTTP status: the one table where
// outcomes meet HTTP. Only an unavailable database is a 5xx that senders
// should retry; a refusal they cannot fix by retrying is a 4xx. The causes
// of unauthenticated requests are answered as CauseUnauthenticated (see
// answerOf).
var httpStatus = map[inbox.Cause]int{
	inbox.CauseUnknownSource:           http.StatusUnauthorized,
	inbox.CauseEndpointTokenMismatch:   http.StatusUnauthorized,
	inbox.CauseUnauthenticated:         http.StatusUnauthorized,
	inbox.CauseNotFound:                http.StatusNotFound,
	inbox.CauseInvalidRequest:          http.StatusBadRequest,
	inbox.CauseMethodNotAllowed:        http.StatusMethodNotAllowed,
	inbox.CauseSignatureMissing:        http.StatusUnauthorized,
	inbox.CauseSignatureMalformed:      http.StatusUnauthorized,
	inbox.CauseSignatureMismatch:       http.StatusUnauthorized,
	inbox.CauseTimestampOutOfTolerance: http.StatusUnauthorized,
	inbox.CausePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	inbox.CauseUnreadableBody:          http.StatusBadRequest,
	inbox.CauseUnparsableBody:          http.StatusBadRequest,
	inbox.CauseMissingEventID:          http.StatusBadRequest,
	inbox.CauseInvalidEventType:        http.StatusBadRequest,
	inbox.CauseInvalidEvent:            http.StatusBadRequest,
	inbox.CauseDatabaseUnavailable:     http.StatusServiceUnavailable,
	// A bug (a panic): 503 with Retry-After, never 500: the same answer
	// as an outage, which a sender that retries sends again (GitHub never
	// does; docs/sources/README.md says who does).
	inbox.CauseInternal: http.StatusServiceUnavailable,
}

// StatusOf returns the HTTP status for a cause. An unmapped cause is a bug;
// it answers 503, not 500, like an outage: nothing was stored, and a
// sender that retries sends it again.
func StatusOf(c inbox.Cause) int {
	if s, ok := httpStatus[c]; ok {
		return s
	}
	return http.StatusServiceUnavailable
}

// unauthenticated is the one answer to every request that is not
// authenticated: unknown source, endpoint token, signature or timestamp.
// Were they told apart, a name that answers anything but "unknown source"
// would be a configured one, and a flood could be aimed at it.
var unauthenticated = response{Status: StatusRejected, Cause: inbox.CauseUnauthenticated,
	Message: "the request is not authenticated for this endpoint; the operator's records say why"}

// authCauses are the causes answered as unauthenticated.
var authCauses = map[inbox.Cause]bool{
	inbox.CauseUnknownSource: true, inbox.CauseEndpointTokenMismatch: true, inbox.CauseUnauthenticated: true,
	inbox.CauseSignatureMissing: true, inbox.CauseSignatureMalformed: true, inbox.CauseSignatureMismatch: true,
	inbox.CauseTimestampOutOfTolerance: true,
}

// answerOf is the answer to a refusal: its status from the table, and a
// body that never depends on the source name for an unauthenticated
// request.
func answerOf(cause inbox.Cause, msg string) (int, response) {
	if authCauses[cause] {
		return http.StatusUnauthorized, unauthenticated
	}
	return StatusOf(cause), response{Status: StatusRejected, Cause: cause, Message: msg}
}

// serveWebhook checks, in this order, what does not depend on the source
// name (the method, the body's size) and then, with one answer for every
// failure, the source, its endpoint and the signature: an unknown name
// costs the same read and gets the same answer as a known one.
func (h *Handler) serveWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("source")
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, POST")
		h.refuse(w, r, name, inbox.Errorf(inbox.CauseMethodNotAllowed, "webhooks are delivered with POST (GET only for a sender's endpoint verification)"))
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.refuse(w, r, name, err)
		return
	}
	// The request is served with one set from here on, whatever a re-read
	// swaps in meanwhile.
	set := h.sources.sources(r.Context())
	src, ident, answered, err := h.authenticate(w, r, set, name, body)
	used := set
	if err != nil && authCauses[inbox.CauseOf(err)] {
		// A burst of refusals may be a source changed since the sources
		// were read (a secret rolled, a source added): when the document
		// read again at once changed them, the request is authenticated
		// again with the sources as they now are. Every unauthenticated
		// cause counts, for a configured name and for any other alike, so
		// that the read's time does not tell a configured name from
		// another (docs/security.md, "Names cost alike").
		key := unknownSource
		if _, configured := set.Lookup(name); configured {
			key = name
		}
		if next := h.sources.refused(r.Context(), key); next != nil {
			src, ident, answered, err = h.authenticate(w, r, next, name, body)
			used = next
		}
	}
	if answered {
		return
	}
	if err != nil {
		if refusedSrc, configured := used.Lookup(name); configured && r.Method == http.MethodPost {
			// Only a verifier's refusal of a configured source's POST
			// at its endpoint has these causes; the rest are never kept.
			h.quarantine(r, refusedSrc, body, inbox.CauseOf(err))
		}
		h.refuse(w, r, name, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StoreTimeout)
	defer cancel()
	res, err := h.store(ctx, storage.EventInsertParams{
		Source: name, SourceKind: src.Kind, EventID: ident.EventID, EventType: ident.EventType, Body: body, Metadata: ident.Metadata,
		GuardBody: src.GuardBody,
	})
	if err != nil {
		if storage.IsDataError(err) {
			err = inbox.WrapError(inbox.CauseInvalidEvent, err, "the event's values were refused by the store")
		} else {
			err = inbox.WrapError(inbox.CauseDatabaseUnavailable, err, "the event could not be stored; retry later")
		}
		h.refuse(w, r, name, err)
		return
	}
	log := h.deps.Logger.With("source", name, "event_id", ident.EventID, "event_type", ident.EventType, "request_id", h.deps.RequestID(r))
	bySource := []string{"source"}
	if !res.SuspectedReplay {
		h.wake(ctx, log, bySource)
		// A suspected replay is not the sender's delivery: it does not
		// count against the source's silence.
		h.recordActivity(ctx, log, name)
	}
	switch {
	case res.Inserted:
		log.Info("webhook accepted", append([]any{"id", res.ID, "bytes", len(body), "payload_jsonb", res.PayloadStored},
			h.cfg.Metrics.Attrs(bySource, metrics.C("Accepted", 1), metrics.Metric{Name: "AcceptedBytes", Unit: metrics.Bytes, Value: float64(len(body))})...)...)
		writeJSON(w, http.StatusOK, response{Status: StatusAccepted, ID: res.ID})
		return
	case res.SuspectedReplay:
		// A body the source has stored under another id: its sender signs
		// neither a time nor the id, so this is a captured delivery posted
		// again (or a sender sending one event twice under two ids).
		// Nothing is stored or processed. The answer is a 2xx, as for a
		// duplicate: an honest sender must not retry it, and the replayer
		// learns nothing it can use (docs/security.md).
		log.Warn("webhook suspected replay", append([]any{"cause", inbox.CauseSuspectedReplay, "id", res.ID,
			"stored_event_id", res.StoredEventID, "stored_event_type", res.StoredType},
			h.cfg.Metrics.Attrs(bySource, metrics.C("SuspectedReplay", 1))...)...)
		h.recordAnomaly(ctx, log, inbox.PayloadMismatch{
			Source: name, EventID: res.StoredEventID, Cause: inbox.CauseSuspectedReplay, StoredSHA256: res.StoredSHA256,
			ReceivedSHA256: res.BodySHA256[:], ReceivedSize: len(body), ReceivedEventID: ident.EventID, ReceivedEventType: ident.EventType,
		})
		writeJSON(w, http.StatusOK, response{Status: StatusDuplicate, Cause: inbox.CauseSuspectedReplay})
		return
	case res.Mismatch():
		// The first body wins; the event stays a duplicate. The record lets
		// an operator see a sender that changed an event under one id.
		log.Warn("webhook duplicate with a different body", append([]any{"cause", inbox.CausePayloadMismatch, "id", res.ID},
			h.cfg.Metrics.Attrs(bySource, metrics.C("Duplicate", 1), metrics.C("PayloadMismatch", 1))...)...)
		h.recordAnomaly(ctx, log, inbox.PayloadMismatch{
			Source: name, EventID: ident.EventID, Cause: inbox.CausePayloadMismatch, StoredSHA256: res.StoredSHA256,
			ReceivedSHA256: res.BodySHA256[:], ReceivedSize: len(body),
		})
	default:
		log.Info("webhook duplicate", append([]any{"id", res.ID}, h.cfg.Metrics.Attrs(bySource, metrics.C("Duplicate", 1))...)...)
	}
	writeJSON(w, http.StatusOK, response{Status: StatusDuplicate})
}

// authenticate checks the request against set: the source, its endpoint,
// a handshake of its kind, and the signature. answered reports that the
// request was answered (a handshake, or its refusal); otherwise err is the
// refusal, or nil with the source and the event's identity. Every refusal
// costs the hash a verifier would have made.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, set *source.Set, name string, body []byte) (src *source.Source, ident inbox.Identity, answered bool, err error) {
	token, tokened := r.PathValue("token"), r.PathValue("token") != ""
	src, ok := set.Lookup(name)
	if !ok {
		hashLikeAVerifier(body)
		return nil, ident, false, inbox.Errorf(inbox.CauseUnknownSource, "no such source is configured")
	}
	if !src.AllowsEndpoint(token, tokened) {
		hashLikeAVerifier(body)
		msg := "the path's endpoint token is not the source's"
		if !tokened {
			msg = "the source is reachable only at its tokened path"
		}
		return nil, ident, false, inbox.Errorf(inbox.CauseEndpointTokenMismatch, "%s", msg)
	}
	if h.handshake(w, r, src, body) {
		return nil, ident, true, nil
	}
	if r.Method == http.MethodGet {
		// Any name, any kind: one answer, so a GET does not tell which
		// names are sources, nor which of them handshake.
		return nil, ident, false, inbox.Errorf(inbox.CauseUnauthenticated, "a GET is answered only as an authenticated handshake of the source's kind")
	}
	ident, err = src.Verifier.Verify(r.Header, body, h.deps.Clock.Now())
	if err != nil {
		if refusedBeforeTheMAC(inbox.CauseOf(err)) {
			hashLikeAVerifier(body)
		}
		return nil, ident, false, err
	}
	return src, ident, false, nil
}

// decoyKey is a per-process random key for hashLikeAVerifier: nothing
// is ever verified with it.
var decoyKey = func() []byte {
	k := make([]byte, sha256.BlockSize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on a supported platform
	}
	return k
}()

// hashLikeAVerifier does the work a verifier does before it can refuse a
// signature that does not match: an HMAC-SHA256 over the whole body, the
// common kinds' hash. An unauthenticated request whose refusal comes
// before any verifier hashed its body (an unknown source, a wrong
// endpoint token, a missing or malformed signature header) does it too,
// so that the time of the answer does not tell a configured name from an
// unknown one (docs/security.md, "Names cost alike").
func hashLikeAVerifier(body []byte) {
	m := hmac.New(sha256.New, decoyKey)
	m.Write(body)
	decoySink.Store(uint32(m.Sum(nil)[0]))
}

// decoySink keeps the decoy's result observable, so that no compiler
// drops the work.
var decoySink atomic.Uint32

// refusedBeforeTheMAC reports whether a verifier's refusal with cause
// comes before it hashed the body: every kind checks the signature's
// and timestamp's presence and form first (signature_missing,
// signature_malformed), then the MAC (signature_mismatch), then the
// timestamp's distance from now (timestamp_out_of_tolerance).
func refusedBeforeTheMAC(c inbox.Cause) bool {
	return c == inbox.CauseSignatureMissing || c == inbox.CauseSignatureMalformed
}

// handshake answers the request when it is an authenticated endpoint
// verification of the source's kind (source.Handshaker), and reports
// whether it answered (or refused). The answer is the sender's, written
// as the kind made it, with nosniff and no-store; nothing is stored, and
// the handshake is logged and recorded like a refusal, cause handshake.
// An unauthenticated one is refused like any unauthenticated request.
func (h *Handler) handshake(w http.ResponseWriter, r *http.Request, src *source.Source, body []byte) bool {
	if !src.Handshakes() {
		return false
	}
	ans, ok, err := src.Handshake(source.HandshakeRequest{Method: r.Method, Query: r.URL.Query(), Header: r.Header, Body: body, Now: h.deps.Clock.Now()})
	if err != nil {
		h.refuse(w, r, src.Name, err)
		return true
	}
	if !ok {
		return false
	}
	requestID := cleanText(h.deps.RequestID(r), 128)
	h.deps.Logger.Info("webhook handshake answered", append([]any{"source", src.Name, "cause", inbox.CauseHandshake, "request_id", requestID, "method", r.Method},
		h.cfg.Metrics.Attrs([]string{"source"}, metrics.C("Handshake", 1))...)...)
	h.recordRejection(r, src.Name, "", inbox.CauseHandshake, "answered the "+src.Kind+" sender's endpoint verification ("+r.Method+"); nothing stored", requestID)
	// ServeHTTP has set no-store and nosniff, as on every answer.
	w.Header().Set("Content-Type", ans.ContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(ans.Body)
	return true
}

// Retrying the insert: the first wait, doubled per attempt up to the last.
const (
	storeRetryFirst = 100 * time.Millisecond
	storeRetryMax   = 2 * time.Second
)

// beforeTheDatabase reports whether err guarantees that nothing reached the
// database: the connection could not be made (pgconn.ConnectError), or
// pgx says the statement was not sent (pgconn.SafeToRetry).
func beforeTheDatabase(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}

// store inserts the event, and tries again while the store's timeout
// allows when an attempt failed before anything reached the database (a
// connection refused or reset while dialing: beforeTheDatabase), as a
// database that is restarting, failing over or resuming from a pause
// answers: the sender then gets its 200 late rather than a 503. An attempt
// that may have reached the database is not repeated here; the insert is
// idempotent, and the sender's own retry answers duplicate if it landed.
func (h *Handler) store(ctx context.Context, p storage.EventInsertParams) (storage.EventInsertResult, error) {
	wait := storeRetryFirst
	for {
		res, err := h.deps.Store.EventInsert(ctx, p)
		if err == nil || !beforeTheDatabase(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(wait):
		}
		wait = min(2*wait, storeRetryMax)
	}
}

// wake starts the processor for a stored event. The event is durable
// whatever happens here: a failed wake-up leaves it to the sweep.
func (h *Handler) wake(ctx context.Context, log *slog.Logger, bySource []string) {
	if h.deps.Wake == nil {
		return
	}
	if err := h.deps.Wake.Wake(ctx); err != nil {
		log.Warn("webhook stored; the processor's wake-up failed", append([]any{"cause", inbox.CauseWakeFailed, "err", err},
			h.cfg.Metrics.Attrs(bySource, metrics.C("WakeFailed", 1))...)...)
	}
}

// recordAnomaly records a payload mismatch or suspected replay for the
// stored event, within the store's cap per event. It never changes the
// answer: a failure is logged.
func (h *Handler) recordAnomaly(ctx context.Context, log *slog.Logger, m inbox.PayloadMismatch) {
	recorded, err := h.deps.Store.PayloadMismatchInsert(ctx, m)
	switch {
	case err != nil:
		log.Error("recording "+string(m.Cause)+" failed", "cause", inbox.CauseDatabaseUnavailable, "err", err)
	case !recorded:
		log.Debug("not recorded: the stored event has as many records as are kept", "cause", m.Cause, "stored_event_id", m.EventID)
	}
}

// initialBodyBytes is the most readBody reserves before reading, whatever
// Content-Length declares: most webhooks fit.
const initialBodyBytes = 16 << 10

// readBody reads the whole raw body, refusing more than MaxBodyBytes
// before reading it when Content-Length says so, and while reading when it
// does not.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	max := h.cfg.MaxBodyBytes
	if r.ContentLength > max {
		// The request's own length is not repeated: no answer echoes the request.
		return nil, inbox.Errorf(inbox.CausePayloadTooLarge, "the body is over the limit of %d bytes", max)
	}
	if r.Body == nil {
		return []byte{}, nil
	}
	// The declared length reserves at most initialBodyBytes: a client
	// that declares a megabyte and sends a byte (a stalled connection on
	// the local server, where nobody checked the length) costs what it
	// sent; the rest grows with the bytes received.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, initialBodyBytes)))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, inbox.Errorf(inbox.CausePayloadTooLarge, "the body exceeds %d bytes", max)
		}
		return nil, inbox.WrapError(inbox.CauseUnreadableBody, err, "the body could not be read")
	}
	return buf.Bytes(), nil
}

// unknownSource is the one name every source name that is not configured
// is counted, sampled and recorded under: the sender's text never becomes
// a metric's dimension, a sampler key or a stored source name, so any
// number of names costs one of each.
const unknownSource = "(unknown)"

// refuse answers a request that is not accepted and logs one line for it:
// source, cause and request id, never the body or a header value. The line
// is also an EMF record counting the refusal per source and cause, and
// refusals of webhook requests are sampled into webhook_rejections by the
// background writer, so a refusal never waits for the database. The answer
// carries no text from the request.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, sourceName string, err error) {
	cause := inbox.CauseOf(err)
	msg := inbox.MessageOf(err)
	status, resp := answerOf(cause, msg)
	requestID := cleanText(h.deps.RequestID(r), 128)
	// The source dimension must come from a bounded set (each value is a
	// billed metric): a name that is not configured is the sender's text
	// (an unknown source, or a GET refused before the lookup), so it goes
	// in requested_source, escaped, instead.
	source, requested := sourceName, ""
	attrs := []any{"cause", cause, "request_id", requestID, "status", status, "message", msg}
	if _, configured := h.sources.current.Load().Lookup(sourceName); !configured || cause == inbox.CauseUnknownSource {
		requested = cleanText(sourceName, inbox.MaxSourceNameLen)
		attrs = append(attrs, "requested_source", requested)
		source = unknownSource
	}
	attrs = append([]any{"source", source}, attrs...)
	dims := []string{"source", "cause"}
	if status >= 500 {
		attrs = append(attrs, "err", err)
		var extra logAttrser
		if errors.As(err, &extra) {
			for _, a := range extra.LogAttrs() {
				attrs = append(attrs, a)
			}
		}
		h.deps.Logger.Error("webhook not stored", append(attrs, h.cfg.Metrics.Attrs(dims, metrics.C("Unavailable", 1))...)...)
		resp.Status = StatusUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(5))
	} else {
		h.deps.Logger.Warn("webhook rejected", append(attrs, h.cfg.Metrics.Attrs(dims, metrics.C("Rejected", 1))...)...)
		if cause != inbox.CauseNotFound {
			h.recordRejection(r, source, requested, cause, msg, requestID)
		}
	}
	writeJSON(w, status, resp)
}

// recordRejection queues a sampled record of a refusal for the background
// writer (rejections.go). It never waits and never changes the answer.
// An unknown name is recorded under unknownSource, the name it asked for
// (escaped) in the message.
func (h *Handler) recordRejection(r *http.Request, source, requested string, cause inbox.Cause, msg, requestID string) {
	ok, suppressed := h.sampler.allow(source+"\x00"+string(cause), h.deps.Clock.Now())
	if !ok {
		return
	}
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	if source == unknownSource && requested != "" {
		msg += "; the name requested: " + requested
	}
	h.rejections.add(inbox.Rejection{
		Source: source, Cause: cause, Message: cleanText(msg, 512), RequestID: requestID,
		RemoteAddr: cleanText(remote, 64), BodySize: max(r.ContentLength, 0), Suppressed: suppressed,
	})
}

// cleanText makes sender-controlled text safe to store, log and print:
// valid UTF-8 with every control character escaped
// (inbox.EscapeControls; Postgres text cannot hold NUL, and an escape
// sequence would drive the terminal of whoever reads it), at most n bytes.
func cleanText(s string, n int) string {
	s = inbox.EscapeControls(s, "")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) { // do not cut a character in half
		s = s[:len(s)-1]
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v response) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// The body is JSON whatever a client guesses: never sniffed as HTML.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := json.Marshal(v) // response holds only strings and ints
	_, _ = w.Write(append(b, '\n'))
}
