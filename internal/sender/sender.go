// Package sender plays the webhook sender: it builds sample events and signs
// them exactly as each source kind's sender does, then posts them or prints
// them as a curl command. It is how `make dev` shows a working request, and
// how tests, benchmarks and the CLI send real signed deliveries.
package sender

import (
	"bytes"
	"context"
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
	Source string
	// Path is where the source is posted: source.Source.Path, with its
	// endpoint token when it has one.
	Path    string
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
	return Request{Source: src.Name, Path: src.Path(), EventID: eventID, Header: h, Body: body}, nil
}

// Sample returns a new, signed sample event for src with a random id, so
// every sample is accepted as a new event. The body, id, type and extra
// headers are src's kind's own (source.Source.Sample: an invoice payment
// for stripe, standard and hmac, an issue for github, an order for square
// and shopify), signed with src's first secret. A source whose kind makes
// no sample is an error, never another kind's shape.
func Sample(src *source.Source, now time.Time) (Request, error) {
	s, err := src.Sample(now)
	if err != nil {
		return Request{}, err
	}
	req, err := SignEvent(src, s.Body, s.EventID, s.EventType, now)
	if err != nil {
		return Request{}, err
	}
	for k, vs := range s.Header {
		req.Header[k] = vs
	}
	return req, nil
}

// Post sends r to baseURL + r.Path and returns the status
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

// URL returns where r is posted on a receiver at baseURL: its Path, or
// /webhooks/{Source} when it has none.
func (r Request) URL(baseURL string) string {
	path := r.Path
	if path == "" {
		path = "/webhooks/" + r.Source
	}
	return strings.TrimRight(baseURL, "/") + path
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
