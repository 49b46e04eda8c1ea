package source

import (
	"encoding/json"
	"time"
)

// A source's silence setting: "silent_after": "6h" says that the source
// is expected to deliver at least once in any such span, so that a sender
// that stopped (an endpoint the sender disabled after failures, a
// webhook deleted on its side) is noticed. Every kind takes it; it is
// taken out of the source's JSON before the kind decodes the rest, as the
// endpoint options are.
const fieldSilentAfter = "silent_after"

// MinSilentAfter and MaxSilentAfter bound silent_after. Below the minimum
// a quiet minute would alarm (the receipts it is measured against are
// recorded to within a minute, and the check runs on the hour when
// nothing else runs); above the maximum a sender could be gone for
// longer than anyone would still call it noticed.
const (
	MinSilentAfter = 15 * time.Minute
	MaxSilentAfter = 30 * 24 * time.Hour
)

// takeSilentAfter removes silent_after from a source's JSON and parses it:
// zero when the source has none. The error names the source and the
// field, never the value (a secret pasted in the wrong place must not
// reach a log).
func takeSilentAfter(name string, raw json.RawMessage) (json.RawMessage, time.Duration, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return raw, 0, nil // the kind's strict decoding reports it
	}
	v, ok := fields[fieldSilentAfter]
	if !ok {
		return raw, 0, nil
	}
	delete(fields, fieldSilentAfter)
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, 0, fieldError(name, fieldSilentAfter, `must be a duration string such as "6h" or "90m"`)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, 0, fieldError(name, fieldSilentAfter, `must be a duration such as "6h", "90m" or "720h" (units h, m, s)`)
	}
	if d < MinSilentAfter || d > MaxSilentAfter {
		return nil, 0, fieldError(name, fieldSilentAfter, "must be from 15m to 720h (30 days), got %s", d)
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, 0, fieldError(name, fieldSilentAfter, "%v", err)
	}
	return rest, d, nil
}
