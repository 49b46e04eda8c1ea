// Package operatorapi is the operator API over HTTP: version 1 of a JSON
// API that serves operations.API (every read the CLI and the console make,
// and the actions, each counted first) to webhookctl and the console on an
// operator's laptop, through the operator function's Lambda function URL.
//
// Nothing in it is public. Lambda authenticates every request with AWS
// IAM (SigV4) before the function runs and hands the verified principal
// to it in the event (lambdahttp.IAMCaller); a request without one is
// refused, and the principal is what every action records as its operator
// (never anything the client sends). Whether the caller may act is the
// deployment's: the read-only function serves a read-only
// operations.Service. Requests and answers are bounded (pages, a body in
// chunks), every input is validated, and every error is answered through
// one table (StatusOf) as {"error": {"cause", "message"}}.
//
// The routes (all under /v1; reads are GETs with a query, actions POSTs
// with a JSON body):
//
//	GET  /v1/whoami
//	GET  /v1/stats          window, charts, storage
//	GET  /v1/refusals       window, limit
//	GET  /v1/events         source, type, state, since, from, to, before, limit
//	GET  /v1/events/find    find, source
//	GET  /v1/event          id | source and event_id
//	GET  /v1/event/body     id, offset (raw bytes, at most BodyChunk)
//	GET  /v1/dead-letters   id, source, type, since, from, to, after, limit,
//	                        ids, cause, error, received_since, received_from, received_to
//	GET  /v1/actions        since, before, limit
//	POST /v1/requeue        operations.RequeueRequest
//	POST /v1/replay         operations.ReplayRequest
//	POST /v1/expunge        operations.ExpungeRequest
//	POST /v1/archive-run    operations.ArchiveRunRequest
//	POST /v1/pause          operations.PauseRequest
//	POST /v1/resume         operations.PauseRequest
//	POST /v1/resolve        operations.ResolveRequest
//	POST /v1/discard        operations.DiscardRequest
//	GET  /v1/quarantine     source, since, from, to, before, limit
//	GET  /v1/quarantine/delivery  id
//	POST /v1/quarantine/reingest  operations.ReingestRequest
//	POST /v1/quarantine/purge     operations.PurgeRequest
package operatorapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// Version is the API's version, the first segment of every path.
const Version = "v1"

// Limits of a request and of an answer. A Lambda function URL carries at
// most 6 MB each way, and a binary answer travels base64-encoded.
const (
	// MaxRequestBytes bounds an action's JSON body.
	MaxRequestBytes = 64 << 10
	// MaxQueryBytes bounds a read's query string.
	MaxQueryBytes = 8 << 10
	// BodyChunk is the most bytes of an event's body one answer carries
	// (4 MiB once base64-encoded); a larger body takes several requests.
	BodyChunk = 3 << 20
)

// Headers of a body chunk's answer.
const (
	HeaderBodySize   = "X-Body-Size"
	HeaderBodyOffset = "X-Body-Offset"
	HeaderBodyFrom   = "X-Body-From"
	HeaderBodySHA256 = "X-Body-Sha256"
	HeaderArchiveKey = "X-Archive-Key"
)

// Caller is the principal AWS verified for a request.
type Caller struct {
	// UserARN is the principal: arn:aws:sts::123456789012:assumed-role/
	// Role/session, arn:aws:iam::123456789012:user/name.
	UserARN string
	// UserID is its unique id (AROA...:session, AIDA...).
	UserID    string
	AccountID string
	AccessKey string
}

// Name is what actions record as their operator: the principal's ARN, or
// its unique id when the ARN is longer than a record holds (an IAM user's
// path can make it so).
func (c Caller) Name() string {
	if len(c.UserARN) <= maxOperatorBytes {
		return c.UserARN
	}
	return "aws-principal:" + c.UserID
}

// maxOperatorBytes is the record's bound on an operator's name.
const maxOperatorBytes = 200

// Deps is what a Handler serves and reports to. The Handler has no
// settings of its own, so no Config: its routes and bounds are the API's
// version.
type Deps struct {
	// API serves the requests: an operations.Service. Required.
	API operations.API
	// Caller returns the request's verified principal; false when it
	// carries none (the request is then refused). The operator function
	// reads lambdahttp.IAMCaller; only development stands in for IAM.
	// Required.
	Caller func(*http.Request) (Caller, bool)
	// RequestID names a request in the log (lambdahttp.RequestID).
	RequestID func(*http.Request) string
	// Logger gets one line per request: who, what, the status and the
	// cause; never a body.
	Logger *slog.Logger
}

// Handler serves the operator API.
type Handler struct {
	deps   Deps
	log    *slog.Logger
	routes map[string]route
}

// New checks deps and returns the Handler.
func New(deps Deps) (*Handler, error) {
	if deps.API == nil || deps.Caller == nil {
		return nil, errors.New("operatorapi: API and Caller are required")
	}
	if deps.RequestID == nil {
		deps.RequestID = func(*http.Request) string { return "" }
	}
	h := &Handler{deps: deps, log: deps.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.routes = map[string]route{
		"/v1/whoami":              {http.MethodGet, h.whoami},
		"/v1/stats":               {http.MethodGet, read(h, statsKeys, ParseStats, deps.API.Stats)},
		"/v1/refusals":            {http.MethodGet, read(h, refusalsKeys, ParseRefusals, deps.API.Refusals)},
		"/v1/events":              {http.MethodGet, read(h, eventsKeys, ParseEvents, deps.API.Events)},
		"/v1/events/find":         {http.MethodGet, read(h, findKeys, ParseFind, deps.API.Find)},
		"/v1/event":               {http.MethodGet, read(h, eventKeys, ParseEvent, deps.API.Event)},
		"/v1/event/body":          {http.MethodGet, h.body},
		"/v1/dead-letters":        {http.MethodGet, read(h, deadLetterKeys, ParseDeadLetters, deps.API.DeadLetters)},
		"/v1/actions":             {http.MethodGet, read(h, actionKeys, ParseActions, deps.API.Actions)},
		"/v1/requeue":             {http.MethodPost, act(h, deps.API.Requeue)},
		"/v1/replay":              {http.MethodPost, act(h, deps.API.Replay)},
		"/v1/expunge":             {http.MethodPost, act(h, deps.API.Expunge)},
		"/v1/archive-run":         {http.MethodPost, act(h, deps.API.ArchiveRun)},
		"/v1/pause":               {http.MethodPost, act(h, deps.API.Pause)},
		"/v1/resume":              {http.MethodPost, act(h, deps.API.Resume)},
		"/v1/resolve":             {http.MethodPost, act(h, deps.API.Resolve)},
		"/v1/discard":             {http.MethodPost, act(h, deps.API.Discard)},
		"/v1/quarantine":          {http.MethodGet, read(h, quarantineKeys, ParseQuarantine, deps.API.Quarantine)},
		"/v1/quarantine/delivery": {http.MethodGet, read(h, quarantinedKeys, ParseQuarantined, deps.API.QuarantinedDelivery)},
		"/v1/quarantine/reingest": {http.MethodPost, act(h, deps.API.Reingest)},
		"/v1/quarantine/purge":    {http.MethodPost, act(h, deps.API.Purge)},
	}
	return h, nil
}

// route is one path's method and handler.
type route struct {
	method string
	serve  http.HandlerFunc
}

// ServeHTTP authenticates the request, routes it and logs the outcome.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	caller, ok := h.deps.Caller(r)
	switch {
	case !ok || caller.UserARN == "":
		// Before anything is read or routed: an unauthenticated request
		// learns nothing, not even which paths exist.
		h.writeError(rec, inbox.Errorf(inbox.CauseUnauthenticated, "the request carries no verified AWS identity: call the operator function's URL with SigV4-signed requests (webhookctl --stack)"))
	case len(r.URL.RawQuery) > MaxQueryBytes:
		h.writeError(rec, inbox.Errorf(inbox.CauseInvalidRequest, "the query is longer than %d bytes", MaxQueryBytes))
	default:
		op := operations.Operator{Name: caller.Name(), Verified: true}
		h.route(rec, r.WithContext(operations.WithOperator(r.Context(), op)))
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "operator", caller.UserARN,
		"access_key", caller.AccessKey, "request_id", h.deps.RequestID(r), "duration_ms", time.Since(start).Milliseconds()}
	switch {
	case rec.err != nil && rec.status >= 500:
		h.log.Error("operator API: request failed", append(attrs, "cause", inbox.CauseOf(rec.err), "err", rec.err)...)
	case rec.err != nil:
		h.log.Warn("operator API: request refused", append(attrs, "cause", inbox.CauseOf(rec.err), "message", inbox.MessageOf(rec.err))...)
	default:
		h.log.Info("operator API: request served", attrs...)
	}
}

// route serves an authenticated request; a path or method the API does
// not have is answered by the error table, like any other refusal. Paths
// are exact: nothing is cleaned or redirected.
func (h *Handler) route(w *recorder, r *http.Request) {
	rt, ok := h.routes[r.URL.Path]
	switch {
	case !ok:
		h.writeError(w, inbox.Errorf(inbox.CauseNotFound, "no such route: the routes are under /%s (see shared/operatorapi)", Version))
	case r.Method != rt.method:
		w.Header().Set("Allow", rt.method)
		h.writeError(w, inbox.Errorf(inbox.CauseMethodNotAllowed, "%s takes %s", r.URL.Path, rt.method))
	default:
		rt.serve(w, r)
	}
}

// read serves a read: its query checked and parsed, then answered.
func read[Q, R any](h *Handler, keys []string, parse func(url.Values) (Q, error), call func(context.Context, Q) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := query(r, keys)
		if err != nil {
			h.writeError(w, err)
			return
		}
		q, err := parse(v)
		if err != nil {
			h.writeError(w, err)
			return
		}
		answer(h, w, r, q, call)
	}
}

// act serves an action: its JSON body checked and decoded, then done.
func act[Q, R any](h *Handler, call func(context.Context, Q) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var q Q
		if err := decode(w, r, &q); err != nil {
			h.writeError(w, err)
			return
		}
		answer(h, w, r, q, call)
	}
}

// answer calls the API with q and writes its result, or its error through
// the one cause → status table.
func answer[Q, R any](h *Handler, w http.ResponseWriter, r *http.Request, q Q, call func(context.Context, Q) (R, error)) {
	res, err := call(r.Context(), q)
	if err != nil {
		h.writeError(w, err)
		return
	}
	h.writeJSON(w, http.StatusOK, res)
}

func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r, nil); err != nil {
		h.writeError(w, err)
		return
	}
	id, err := h.deps.API.Whoami(r.Context())
	if err != nil {
		h.writeError(w, err)
		return
	}
	h.writeJSON(w, http.StatusOK, id)
}

// body answers a chunk of an event's raw body: the bytes from offset, at
// most BodyChunk, with the body's size, origin and hash in headers.
func (h *Handler) body(w http.ResponseWriter, r *http.Request) {
	v, err := query(r, bodyKeys)
	if err != nil {
		h.writeError(w, err)
		return
	}
	id, err := number(v, "id")
	if err == nil && id == 0 {
		err = invalidParam("id", "an event's id")
	}
	if err != nil {
		h.writeError(w, err)
		return
	}
	offset, err := number(v, "offset")
	if err != nil {
		h.writeError(w, err)
		return
	}
	b, err := h.deps.API.EventBody(r.Context(), id)
	if err != nil {
		h.writeError(w, err)
		return
	}
	if offset > int64(len(b.Bytes)) {
		h.writeError(w, invalidParam("offset", fmt.Sprintf("at most the body's size, %d", len(b.Bytes))))
		return
	}
	chunk := b.Bytes[offset:min(int64(len(b.Bytes)), offset+BodyChunk)]
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	hd.Set(HeaderBodySize, strconv.Itoa(len(b.Bytes)))
	hd.Set(HeaderBodyOffset, strconv.FormatInt(offset, 10))
	hd.Set(HeaderBodyFrom, b.From)
	hd.Set(HeaderBodySHA256, b.SHA256)
	if b.ArchiveKey != "" {
		hd.Set(HeaderArchiveKey, url.PathEscape(b.ArchiveKey))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(chunk)
}

// query parses the request's query, refusing a key the route does not
// take or a key given twice.
func query(r *http.Request, keys []string) (url.Values, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, inbox.Errorf(inbox.CauseInvalidRequest, "the query does not parse")
	}
	for k, vals := range v {
		if !slices.Contains(keys, k) {
			return nil, inbox.Errorf(inbox.CauseInvalidArgument, "unknown parameter %q (this route takes %v)", inbox.EscapeControls(k, ""), keys)
		}
		if len(vals) > 1 {
			return nil, invalidParam(k, "given once")
		}
	}
	return v, nil
}

// decode reads an action's body: JSON, at most MaxRequestBytes, one
// object of the request's type with no unknown field.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return inbox.Errorf(inbox.CauseInvalidRequest, "an action's body is JSON (Content-Type: application/json)")
	}
	if len(r.URL.RawQuery) > 0 {
		return inbox.Errorf(inbox.CauseInvalidArgument, "an action takes no query: its request is the JSON body")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return inbox.Errorf(inbox.CausePayloadTooLarge, "the request body is larger than %d bytes", MaxRequestBytes)
	}
	if err != nil {
		return inbox.Errorf(inbox.CauseUnreadableBody, "the request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return inbox.Errorf(inbox.CauseUnparsableBody, "the request body is not the action's JSON: %s", inbox.EscapeControls(err.Error(), ""))
	}
	if dec.More() {
		return inbox.Errorf(inbox.CauseUnparsableBody, "the request body holds more than one JSON value")
	}
	return nil
}

func invalidParam(k, want string) error {
	return inbox.Errorf(inbox.CauseInvalidArgument, "%s must be %s", k, want)
}

// statuses is the one table from a cause to its HTTP status.
var statuses = map[inbox.Cause]int{
	inbox.CauseInvalidArgument:         http.StatusBadRequest,
	inbox.CauseInvalidRequest:          http.StatusBadRequest,
	inbox.CauseUnparsableBody:          http.StatusBadRequest,
	inbox.CauseUnreadableBody:          http.StatusBadRequest,
	inbox.CauseUnauthenticated:         http.StatusUnauthorized,
	inbox.CauseReadOnly:                http.StatusForbidden,
	inbox.CauseForbidden:               http.StatusForbidden,
	inbox.CauseMisdirectedRequest:      http.StatusMisdirectedRequest,
	inbox.CauseTooManyAttempts:         http.StatusTooManyRequests,
	inbox.CauseNotFound:                http.StatusNotFound,
	inbox.CauseEventNotFound:           http.StatusNotFound,
	inbox.CauseMethodNotAllowed:        http.StatusMethodNotAllowed,
	inbox.CauseCountChanged:            http.StatusConflict,
	inbox.CauseAlreadyPaused:           http.StatusConflict,
	inbox.CauseNotPaused:               http.StatusConflict,
	inbox.CauseConfirmationMismatch:    http.StatusConflict,
	inbox.CauseEventExpunged:           http.StatusGone,
	inbox.CauseBodyExpired:             http.StatusGone,
	inbox.CausePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	inbox.CauseInternal:                http.StatusInternalServerError,
	inbox.CauseArchiveCorrupt:          http.StatusInternalServerError,
	inbox.CauseBodyCorrupt:             http.StatusInternalServerError,
	inbox.CauseArchiveStoreFailed:      http.StatusBadGateway,
	inbox.CauseDatabaseUnavailable:     http.StatusServiceUnavailable,
	inbox.CauseArchiveStoreUnavailable: http.StatusServiceUnavailable,
	inbox.CauseArchiveNotConfigured:    http.StatusServiceUnavailable,
	inbox.CauseQuarantineNotFound:      http.StatusNotFound,
	inbox.CauseSourcesNotConfigured:    http.StatusServiceUnavailable,
}

// StatusOf is the HTTP status of an error's cause; a cause the table does
// not know is a bug: 500.
func StatusOf(err error) int {
	if s, ok := statuses[inbox.CauseOf(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CauseOfStatus is the cause a status stands for when an answer carries
// none of ours (a gateway's or Lambda's own): the reverse of StatusOf for
// the client.
func CauseOfStatus(status int) inbox.Cause {
	switch status {
	case http.StatusUnauthorized:
		return inbox.CauseUnauthenticated
	case http.StatusForbidden:
		return inbox.CauseForbidden
	case http.StatusNotFound:
		return inbox.CauseNotFound
	case http.StatusRequestEntityTooLarge:
		return inbox.CausePayloadTooLarge
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return inbox.CauseDatabaseUnavailable
	}
	if status >= 400 && status < 500 {
		return inbox.CauseInvalidRequest
	}
	return inbox.CauseInternal
}

// ErrorBody is an error's answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the cause and the message of an error.
type ErrorDetail struct {
	Cause   inbox.Cause `json:"cause"`
	Message string      `json:"message"`
}

// WriteError answers an error the adapter met before the handler ran (an
// event that is no request) or a panic, through the same table, and logs
// it: Handler is the lambdahttp.ErrorWriter of the operator function.
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("operator API: request failed", "method", r.Method, "path", r.URL.Path,
		"request_id", h.deps.RequestID(r), "cause", inbox.CauseOf(err), "err", err)
	h.writeError(w, err)
}

// writeError answers err through the table; its message is the cause's
// safe text, never a wrapped error's (which may quote a statement).
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	if rec, ok := w.(*recorder); ok {
		rec.err = err
	}
	msg := inbox.MessageOf(err)
	if inbox.CauseOf(err) == inbox.CauseInternal {
		msg = "internal error: the operator function's log has the details"
	}
	h.writeJSON(w, StatusOf(err), ErrorBody{ErrorDetail{Cause: inbox.CauseOf(err), Message: msg}})
}

// writeJSON answers v as JSON, never cached, never sniffed.
func (h *Handler) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"cause":"internal","message":"the answer could not be encoded"}}`)
		if rec, ok := w.(*recorder); ok {
			rec.err = fmt.Errorf("encode the answer: %w", err)
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// recorder keeps the status and error of an answer for the log line.
type recorder struct {
	http.ResponseWriter
	status int
	err    error
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}
