package operatorclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/operatorapi"
)

// Client is operations.API through a stack's operator function: reads
// (and the dry runs of actions) at its read-only URL, actions at its
// acting URL, every request signed by the HTTP client's transport (the
// operator's AWS credentials, SigV4). It keeps no state between calls.
type Client struct {
	read, act *url.URL
	http      *http.Client
}

var _ operations.API = (*Client)(nil)

// Config configures a Client.
type Config struct {
	// ReadURL is the read-only operator function's URL (the stack's
	// OperatorReadUrl); ActURL the acting one's (OperatorUrl). When only
	// ActURL is given, reads go there too.
	ReadURL, ActURL string
	// HTTP sends the requests; its transport signs them (Transport).
	// Required.
	HTTP *http.Client
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.HTTP == nil {
		return nil, errors.New("operatorclient: an HTTP client is required")
	}
	if cfg.ReadURL == "" {
		cfg.ReadURL = cfg.ActURL
	}
	if cfg.ActURL == "" {
		cfg.ActURL = cfg.ReadURL
	}
	read, err := baseURL(cfg.ReadURL)
	if err != nil {
		return nil, err
	}
	act, err := baseURL(cfg.ActURL)
	if err != nil {
		return nil, err
	}
	return &Client{read: read, act: act, http: cfg.HTTP}, nil
}

// baseURL checks an operator function's URL: HTTPS, or HTTP on loopback
// (make dev's, the tests'); no query, no credentials in it.
func baseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("operatorclient: %q is not an operator function's URL (https://<id>.lambda-url.<region>.on.aws/)", s)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())) {
		return nil, fmt.Errorf("operatorclient: %s: the operator API is reached over HTTPS (plain HTTP only on loopback)", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func isLoopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// Limits of what the client reads: an answer is a page, a chunk of a
// body; more is a broken or hostile server.
const (
	maxAnswerBytes = 16 << 20
	maxBodyBytes   = 64 << 20
)

// Whoami asks the read-only URL who the caller is, then the acting one
// whether it may act: IAM (or the function) refusing there means it may
// not.
func (c *Client) Whoami(ctx context.Context) (*operations.Identity, error) {
	var id operations.Identity
	if err := c.get(ctx, c.read, "/v1/whoami", nil, &id); err != nil {
		return nil, err
	}
	if *c.act == *c.read {
		return &id, nil
	}
	var acting operations.Identity
	switch err := c.get(ctx, c.act, "/v1/whoami", nil, &acting); inbox.CauseOf(err) {
	case inbox.CauseForbidden, inbox.CauseReadOnly:
		id.Access = operations.AccessRead
	default:
		if err != nil {
			return nil, err
		}
		id.Access = acting.Access
	}
	return &id, nil
}

// Stats reads the state of the inbox.
func (c *Client) Stats(ctx context.Context, q operations.StatsQuery) (*operations.Stats, error) {
	return getAs[operations.Stats](ctx, c, "/v1/stats", operatorapi.StatsValues(q))
}

// Refusals reads the window's refusals.
func (c *Client) Refusals(ctx context.Context, q operations.RefusalsQuery) (*operations.Refusals, error) {
	return getAs[operations.Refusals](ctx, c, "/v1/refusals", operatorapi.RefusalsValues(q))
}

// Events reads a page of events.
func (c *Client) Events(ctx context.Context, q operations.EventQuery) (*operations.EventPage, error) {
	return getAs[operations.EventPage](ctx, c, "/v1/events", operatorapi.EventsValues(q))
}

// Find looks an event up.
func (c *Client) Find(ctx context.Context, q operations.FindQuery) (*operations.EventPage, error) {
	return getAs[operations.EventPage](ctx, c, "/v1/events/find", operatorapi.FindValues(q))
}

// Event reads one event in full.
func (c *Client) Event(ctx context.Context, ref operations.EventRef) (*operations.EventDetail, error) {
	return getAs[operations.EventDetail](ctx, c, "/v1/event", operatorapi.EventValues(ref))
}

// DeadLetters reads a page of the open dead letters.
func (c *Client) DeadLetters(ctx context.Context, q operations.DeadLetterQuery) (*operations.DeadLetterPage, error) {
	return getAs[operations.DeadLetterPage](ctx, c, "/v1/dead-letters", operatorapi.DeadLettersValues(q))
}

// Actions reads a page of the operator actions.
func (c *Client) Actions(ctx context.Context, q operations.ActionQuery) (*operations.ActionPage, error) {
	return getAs[operations.ActionPage](ctx, c, "/v1/actions", operatorapi.ActionsValues(q))
}

// EventBody reads an event's body chunk by chunk and checks the whole
// against the hash recorded at receipt, end to end.
func (c *Client) EventBody(ctx context.Context, id int64) (*operations.Body, error) {
	var b operations.Body
	var body []byte
	for {
		v := url.Values{"id": {strconv.FormatInt(id, 10)}}
		if len(body) > 0 {
			v.Set("offset", strconv.Itoa(len(body)))
		}
		resp, err := c.send(ctx, http.MethodGet, c.read, "/v1/event/body", v, nil)
		if err != nil {
			return nil, err
		}
		chunk, err := io.ReadAll(io.LimitReader(resp.Body, operatorapi.BodyChunk+1))
		resp.Body.Close()
		if err != nil {
			return nil, unavailable(err, "the body's answer was cut")
		}
		size, err := strconv.Atoi(resp.Header.Get(operatorapi.HeaderBodySize))
		switch {
		case err != nil || size < 0 || size > maxBodyBytes || len(chunk) > operatorapi.BodyChunk || len(body)+len(chunk) > size:
			return nil, inbox.Errorf(inbox.CauseInternal, "the operator API answered a body chunk that does not fit its size")
		case len(chunk) == 0 && len(body) < size:
			return nil, inbox.Errorf(inbox.CauseInternal, "the operator API answered an empty chunk before the body's end")
		}
		b.From, b.SHA256 = resp.Header.Get(operatorapi.HeaderBodyFrom), resp.Header.Get(operatorapi.HeaderBodySHA256)
		if key, err := url.PathUnescape(resp.Header.Get(operatorapi.HeaderArchiveKey)); err == nil {
			b.ArchiveKey = key
		}
		body = append(body, chunk...)
		if len(body) == size {
			break
		}
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != b.SHA256 {
		return nil, inbox.Errorf(inbox.CauseBodyCorrupt, "the body read through the operator API does not match the hash recorded at receipt")
	}
	b.Bytes = body
	return &b, nil
}

// Requeue counts at the read-only URL, acts at the acting one.
func (c *Client) Requeue(ctx context.Context, r operations.RequeueRequest) (*operations.RequeueResult, error) {
	return postAs[operations.RequeueResult](ctx, c, r.DryRun, "/v1/requeue", r)
}

// Replay counts at the read-only URL, acts at the acting one.
func (c *Client) Replay(ctx context.Context, r operations.ReplayRequest) (*operations.ReplayResult, error) {
	return postAs[operations.ReplayResult](ctx, c, r.DryRun, "/v1/replay", r)
}

// Expunge says what it would erase at the read-only URL, erases at the
// acting one.
func (c *Client) Expunge(ctx context.Context, r operations.ExpungeRequest) (*operations.ExpungeResult, error) {
	return postAs[operations.ExpungeResult](ctx, c, r.DryRun, "/v1/expunge", r)
}

// ArchiveRun counts at the read-only URL, runs at the acting one.
func (c *Client) ArchiveRun(ctx context.Context, r operations.ArchiveRunRequest) (*operations.ArchiveRunResult, error) {
	return postAs[operations.ArchiveRunResult](ctx, c, r.DryRun, "/v1/archive-run", r)
}

// Resolve counts at the read-only URL, resolves at the acting one.
func (c *Client) Resolve(ctx context.Context, r operations.ResolveRequest) (*operations.ResolveResult, error) {
	return postAs[operations.ResolveResult](ctx, c, r.DryRun, "/v1/resolve", r)
}

// Discard counts at the read-only URL, discards at the acting one.
func (c *Client) Discard(ctx context.Context, r operations.DiscardRequest) (*operations.DiscardResult, error) {
	return postAs[operations.DiscardResult](ctx, c, r.DryRun, "/v1/discard", r)
}

// Quarantine reads a page of the quarantined deliveries.
func (c *Client) Quarantine(ctx context.Context, q operations.QuarantineQuery) (*operations.QuarantinePage, error) {
	return getAs[operations.QuarantinePage](ctx, c, "/v1/quarantine", operatorapi.QuarantineValues(q))
}

// QuarantinedDelivery reads one quarantined delivery whole.
func (c *Client) QuarantinedDelivery(ctx context.Context, id int64) (*operations.QuarantinedDetail, error) {
	return getAs[operations.QuarantinedDetail](ctx, c, "/v1/quarantine/delivery", operatorapi.QuarantinedValues(id))
}

// Reingest counts at the read-only URL, re-ingests at the acting one.
func (c *Client) Reingest(ctx context.Context, r operations.ReingestRequest) (*operations.ReingestResult, error) {
	return postAs[operations.ReingestResult](ctx, c, r.DryRun, "/v1/quarantine/reingest", r)
}

// Purge counts at the read-only URL, deletes at the acting one.
func (c *Client) Purge(ctx context.Context, r operations.PurgeRequest) (*operations.PurgeResult, error) {
	return postAs[operations.PurgeResult](ctx, c, r.DryRun, "/v1/quarantine/purge", r)
}

func getAs[R any](ctx context.Context, c *Client, path string, q url.Values) (*R, error) {
	var r R
	if err := c.get(ctx, c.read, path, q, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func postAs[R any](ctx context.Context, c *Client, dryRun bool, path string, req any) (*R, error) {
	base := c.act
	if dryRun {
		base = c.read
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("operatorclient: encode the request: %w", err)
	}
	resp, err := c.send(ctx, http.MethodPost, base, path, nil, b)
	if err != nil {
		return nil, err
	}
	var r R
	if err := decodeAnswer(resp, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *Client) get(ctx context.Context, base *url.URL, path string, q url.Values, v any) error {
	resp, err := c.send(ctx, http.MethodGet, base, path, q, nil)
	if err != nil {
		return err
	}
	return decodeAnswer(resp, v)
}

// send sends one request and returns a 200's answer; any other status is
// turned into the error it carries.
func (c *Client) send(ctx context.Context, method string, base *url.URL, path string, q url.Values, body []byte) (*http.Response, error) {
	u := *base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("operatorclient: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unavailable(err, "the operator API could not be reached at "+base.Redacted())
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(resp)
	}
	return resp, nil
}

// decodeAnswer reads a 200's JSON answer into v.
func decodeAnswer(resp *http.Response, v any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return unavailable(err, "the operator API's answer was cut")
	}
	if len(b) > maxAnswerBytes {
		return inbox.Errorf(inbox.CauseInternal, "the operator API's answer is larger than %d bytes", maxAnswerBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return inbox.WrapError(inbox.CauseInternal, err, "the operator API's answer is not what this webhookctl reads: is it the same version as the stack?")
	}
	return nil
}

// answerError is the error an answer carries: the API's own
// {"error": {"cause", "message"}}, else (Lambda's, IAM's, a gateway's)
// the cause its status stands for, said for an operator.
func answerError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e operatorapi.ErrorBody
	if json.Unmarshal(b, &e) == nil && e.Error.Cause != "" {
		return &inbox.Error{Cause: e.Error.Cause, Message: e.Error.Message}
	}
	cause := operatorapi.CauseOfStatus(resp.StatusCode)
	switch cause {
	case inbox.CauseForbidden:
		return inbox.Errorf(cause, "AWS refused your identity at %s (HTTP 403): it may not invoke this operator function; "+
			"an account admin attaches the stack's OperatorReadPolicy to read, OperatorActPolicy to act", resp.Request.URL.Host)
	case inbox.CauseUnauthenticated:
		return inbox.Errorf(cause, "AWS could not authenticate the request (HTTP 401): check your AWS credentials (aws sts get-caller-identity)")
	}
	return inbox.Errorf(cause, "the operator API answered HTTP %d: %s", resp.StatusCode, inbox.EscapeControls(strings.TrimSpace(string(b[:min(len(b), 200)])), ""))
}

func unavailable(err error, msg string) error {
	return inbox.WrapError(inbox.CauseDatabaseUnavailable, err, msg)
}

// DefaultTimeout bounds one request: an action's call (a replay's share,
// an archive run's objects) fits in the acting function's 300 s timeout.
const DefaultTimeout = 330 * time.Second

// Pause counts at the read-only URL, pauses at the acting one.
func (c *Client) Pause(ctx context.Context, r operations.PauseRequest) (*operations.PauseResult, error) {
	return postAs[operations.PauseResult](ctx, c, r.DryRun, "/v1/pause", r)
}

// Resume counts at the read-only URL, resumes at the acting one.
func (c *Client) Resume(ctx context.Context, r operations.PauseRequest) (*operations.PauseResult, error) {
	return postAs[operations.PauseResult](ctx, c, r.DryRun, "/v1/resume", r)
}
