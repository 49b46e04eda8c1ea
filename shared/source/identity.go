package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// bodyFields decodes the named top-level string fields of a JSON object
// body. It keeps each value's raw token so that invalid UTF-8 is refused
// rather than silently replaced with U+FFFD (two different ids must never
// collapse into one), and a field that is present but not a string is
// reported as such.
func bodyFields(body []byte, names ...string) (map[string]string, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, inbox.Errorf(inbox.CauseUnparsableBody, "the body must be a JSON object")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, inbox.Errorf(inbox.CauseUnparsableBody, "the body is not valid JSON")
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		raw, ok := obj[n]
		if !ok || string(raw) == "null" {
			continue
		}
		s, err := stringToken(n, raw)
		if err != nil {
			return nil, err
		}
		out[n] = s
	}
	return out, nil
}

// stringToken decodes the raw JSON token of the field named name, which
// must be a string of valid UTF-8.
func stringToken(name string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "field %q must be a string", name)
	}
	if !utf8.Valid(raw) {
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "field %q is not valid UTF-8", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "field %q is not a valid JSON string", name)
	}
	return s, nil
}

// maxPathSegments bounds a configured JSON path ("data.object.id").
const maxPathSegments = 16

// parseJSONPath splits a dotted path into its keys. Keys are taken
// literally (no escapes, no array indexes), so a key containing a dot
// cannot be addressed.
func parseJSONPath(path string) ([]string, error) {
	if path == "" {
		return nil, errors.New("the path is empty")
	}
	keys := strings.Split(path, ".")
	if len(keys) > maxPathSegments {
		return nil, fmt.Errorf("the path has %d keys; at most %d are accepted", len(keys), maxPathSegments)
	}
	for _, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("the path %q has an empty key (keys are separated by single dots)", path)
		}
		if !printable(k) {
			return nil, fmt.Errorf("the path %q must be printable text", path)
		}
	}
	return keys, nil
}

// pathString reads the string at a path of keys into a JSON object body,
// with bodyFields' rules: the body must be a JSON object, a value that is
// present must be a string of valid UTF-8, and an absent or null value (or
// a path running into something that is not an object) yields "".
func pathString(body []byte, keys []string) (string, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "the body must be a JSON object")
	}
	if !json.Valid(body) {
		return "", inbox.Errorf(inbox.CauseUnparsableBody, "the body is not valid JSON")
	}
	cur := json.RawMessage(trimmed)
	for _, k := range keys {
		var obj map[string]json.RawMessage
		if len(cur) == 0 || cur[0] != '{' || json.Unmarshal(cur, &obj) != nil {
			return "", nil
		}
		raw, ok := obj[k]
		if !ok || string(raw) == "null" {
			return "", nil
		}
		cur = raw
	}
	return stringToken(strings.Join(keys, "."), cur)
}

// headerIdentity reads an identity header (an event id or type) that may
// appear at most once: repeated, it is ambiguous about which event this is.
// An absent header yields "", which checkIdentity refuses for an id.
func headerIdentity(h http.Header, name string, cause inbox.Cause) (string, error) {
	vals := h.Values(name)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return strings.TrimSpace(vals[0]), nil
	default:
		return "", inbox.Errorf(cause, "the %s header appears %d times; exactly one is accepted", name, len(vals))
	}
}

// metadataHeaders are the headers each kind keeps in an event's metadata
// (metadata key, header), the only ones an operator can search by
// (MetadataHeaders): the receiver stores no other header.
var metadataHeaders = map[string][][2]string{
	KindGitHub:  {{"github_hook_id", githubHookIDHeader}},
	KindShopify: shopifyMetadata,
	KindSlack:   {{"slack_retry_num", slackRetryNumHeader}, {"slack_retry_reason", slackRetryReasonHeader}},
	KindTwilio:  {{"twilio_idempotency_token", twilioIdempotencyHeader}},
	KindZoom:    {{"zoom_tracking_id", zoomTrackingIDHeader}},
}

// MetadataHeader is a header a kind keeps in its events' metadata, under
// Key.
type MetadataHeader struct {
	Kind   string `json:"kind"`
	Header string `json:"header"`
	Key    string `json:"key"`
}

// MetadataHeaders are the headers the kinds keep in their events'
// metadata, by kind, in the order each kind lists them: what a search by
// header can find. (Source.KeptHeaders is another list: the headers a
// quarantined delivery keeps to be verified again.)
func MetadataHeaders() []MetadataHeader {
	var out []MetadataHeader
	for _, kind := range slices.Sorted(maps.Keys(metadataHeaders)) {
		for _, kv := range metadataHeaders[kind] {
			out = append(out, MetadataHeader{Kind: kind, Header: kv[1], Key: kv[0]})
		}
	}
	return out
}

// headerMetadata copies sender-specific identifiers from headers into
// Identity.Metadata, keyed by the names given (metadata key -> header).
// Metadata is informational and never part of the deduplication key, so a
// value that could not be stored as JSONB text (repeated header, invalid
// UTF-8, control characters, longer than MaxEventIDBytes) is left out
// rather than refusing an authentic event. It returns nil when no value is
// kept.
func headerMetadata(h http.Header, keys ...[2]string) map[string]string {
	var out map[string]string
	for _, kv := range keys {
		vals := h.Values(kv[1])
		if len(vals) != 1 {
			continue
		}
		v := strings.TrimSpace(vals[0])
		if v == "" || len(v) > inbox.MaxEventIDBytes || !printable(v) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(keys))
		}
		out[kv[0]] = v
	}
	return out
}

// checkIdentity enforces what the store can index and hold: an id of 1 to
// MaxEventIDBytes bytes of valid UTF-8 without NUL (Postgres text cannot
// hold NUL) or other control characters, and a type within its bound.
func checkIdentity(id inbox.Identity) (inbox.Identity, error) {
	switch {
	case id.EventID == "":
		return id, inbox.Errorf(inbox.CauseMissingEventID, "the event id is missing or empty")
	case len(id.EventID) > inbox.MaxEventIDBytes:
		return id, inbox.Errorf(inbox.CauseMissingEventID, "the event id is %d bytes long; at most %d are accepted", len(id.EventID), inbox.MaxEventIDBytes)
	case !printable(id.EventID):
		return id, inbox.Errorf(inbox.CauseMissingEventID, "the event id must be valid UTF-8 text without control characters")
	case len(id.EventType) > inbox.MaxEventTypeBytes:
		return id, inbox.Errorf(inbox.CauseInvalidEventType, "the event type is %d bytes long; at most %d are accepted", len(id.EventType), inbox.MaxEventTypeBytes)
	case !printable(id.EventType):
		return id, inbox.Errorf(inbox.CauseInvalidEventType, "the event type must be valid UTF-8 text without control characters")
	}
	return id, nil
}

// printable reports whether s is valid UTF-8 with no control characters:
// C0, DEL and C1 (U+0080 to U+009F, which some terminals read as escape
// sequences, CSI among them). An id or type is shown to operators; the CLI
// escapes what it prints anyway, but no sender has a reason to send these.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) })
}
