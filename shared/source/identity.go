package source

import (
	"bytes"
	"encoding/json"
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
		if len(raw) == 0 || raw[0] != '"' {
			return nil, inbox.Errorf(inbox.CauseUnparsableBody, "field %q must be a string", n)
		}
		if !utf8.Valid(raw) {
			return nil, inbox.Errorf(inbox.CauseUnparsableBody, "field %q is not valid UTF-8", n)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, inbox.Errorf(inbox.CauseUnparsableBody, "field %q is not a valid JSON string", n)
		}
		out[n] = s
	}
	return out, nil
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

// printable reports whether s is valid UTF-8 with no control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
