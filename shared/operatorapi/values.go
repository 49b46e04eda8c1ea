package operatorapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The reads' parameters as a URL query: what the API's GET routes take,
// what the client sends, and what the console's forms and links carry, so
// that a filter is written one way everywhere. Each Parse function reads
// only its keys (the console's pages carry others); the API refuses the
// keys a route does not know before parsing (Handler).

// Keys of each read's query.
var (
	statsKeys       = []string{"window", "charts", "storage"}
	refusalsKeys    = []string{"window", "limit"}
	eventsKeys      = []string{"source", "type", "state", "since", "from", "to", "before", "limit", "match", "header"}
	findKeys        = []string{"find", "source"}
	eventKeys       = []string{"id", "source", "event_id"}
	bodyKeys        = []string{"id", "offset"}
	deadLetterKeys  = []string{"id", "source", "type", "since", "from", "to", "after", "limit", "ids", "cause", "error", "received_since", "received_from", "received_to"}
	actionKeys      = []string{"since", "before", "limit"}
	quarantineKeys  = []string{"source", "since", "from", "to", "before", "limit"}
	quarantinedKeys = []string{"id"}
)

// StatsValues writes q as a query.
func StatsValues(q operations.StatsQuery) url.Values {
	v := url.Values{}
	if q.Window > 0 {
		v.Set("window", q.Window.String())
	}
	setBool(v, "charts", q.Charts)
	setBool(v, "storage", q.Storage)
	return v
}

// ParseStats reads a StatsQuery.
func ParseStats(v url.Values) (operations.StatsQuery, error) {
	var q operations.StatsQuery
	var err error
	if q.Window, err = span(v, "window"); err != nil {
		return q, err
	}
	if q.Charts, err = flag(v, "charts"); err != nil {
		return q, err
	}
	q.Storage, err = flag(v, "storage")
	return q, err
}

// RefusalsValues writes q as a query.
func RefusalsValues(q operations.RefusalsQuery) url.Values {
	v := url.Values{}
	if q.Window > 0 {
		v.Set("window", q.Window.String())
	}
	setInt(v, "limit", int64(q.Limit))
	return v
}

// ParseRefusals reads a RefusalsQuery.
func ParseRefusals(v url.Values) (operations.RefusalsQuery, error) {
	var q operations.RefusalsQuery
	var err error
	if q.Window, err = span(v, "window"); err != nil {
		return q, err
	}
	n, err := number(v, "limit")
	q.Limit = int(n)
	return q, err
}

// EventsValues writes q as a query.
func EventsValues(q operations.EventQuery) url.Values {
	v := url.Values{}
	setText(v, "source", q.Source)
	setText(v, "type", q.Type)
	setText(v, "state", q.State)
	setWindow(v, q.Window)
	setInt(v, "before", q.Before)
	setInt(v, "limit", int64(q.Limit))
	setText(v, "match", q.Match)
	setText(v, "header", q.Header)
	return v
}

// ParseEvents reads an EventQuery.
func ParseEvents(v url.Values) (operations.EventQuery, error) {
	q := operations.EventQuery{Source: get(v, "source"), Type: get(v, "type"), State: get(v, "state"),
		Match: get(v, "match"), Header: get(v, "header")}
	// The search's documents are bounded here too, before anything
	// else reads them (operations checks what they say).
	if len(q.Match) > operations.MaxMatchBytes {
		return q, invalidParam("match", fmt.Sprintf("JSON of at most %d bytes", operations.MaxMatchBytes))
	}
	if len(q.Header) > operations.MaxFilterBytes+1+inbox.MaxEventIDBytes {
		return q, invalidParam("header", "NAME=VALUE, such as X-GitHub-Hook-ID=123456")
	}
	var err error
	if q.Window, err = window(v); err != nil {
		return q, err
	}
	q.Before, q.Limit, err = page(v, "before")
	return q, err
}

// FindValues writes q as a query.
func FindValues(q operations.FindQuery) url.Values {
	v := url.Values{}
	setText(v, "find", q.Find)
	setText(v, "source", q.Source)
	return v
}

// ParseFind reads a FindQuery.
func ParseFind(v url.Values) (operations.FindQuery, error) {
	return operations.FindQuery{Find: get(v, "find"), Source: get(v, "source")}, nil
}

// EventValues writes r as a query.
func EventValues(r operations.EventRef) url.Values {
	v := url.Values{}
	setInt(v, "id", r.ID)
	setText(v, "source", r.Source)
	setText(v, "event_id", r.EventID)
	return v
}

// ParseEvent reads an EventRef.
func ParseEvent(v url.Values) (operations.EventRef, error) {
	r := operations.EventRef{Source: get(v, "source"), EventID: get(v, "event_id")}
	var err error
	r.ID, err = number(v, "id")
	return r, err
}

// DeadLettersValues writes q as a query.
func DeadLettersValues(q operations.DeadLetterQuery) url.Values {
	v := url.Values{}
	setInt(v, "id", q.ID)
	setText(v, "source", q.Source)
	setText(v, "type", q.Type)
	setWindow(v, q.Window)
	setCriteria(v, q.Criteria)
	setInt(v, "after", q.After)
	setInt(v, "limit", int64(q.Limit))
	return v
}

// setCriteria writes a selection's criteria: ids as one comma-separated
// value, the receipt window under received_*.
func setCriteria(v url.Values, c operations.Criteria) {
	if len(c.IDs) > 0 {
		ids := make([]string, len(c.IDs))
		for i, id := range c.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		v.Set("ids", strings.Join(ids, ","))
	}
	setText(v, "cause", c.Cause)
	setText(v, "error", c.Error)
	w := url.Values{}
	setWindow(w, c.Received)
	for k, vs := range w {
		v["received_"+k] = vs
	}
}

// criteria reads what setCriteria writes.
func criteria(v url.Values) (operations.Criteria, error) {
	c := operations.Criteria{Cause: get(v, "cause"), Error: get(v, "error")}
	if s := get(v, "ids"); s != "" {
		for f := range strings.SplitSeq(s, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil || id <= 0 {
				return c, invalidParam("ids", "positive whole numbers separated by commas")
			}
			c.IDs = append(c.IDs, id)
		}
	}
	var err error
	c.Received, err = operations.ParseWindow(v.Get("received_since"), v.Get("received_from"), v.Get("received_to"))
	return c, err
}

// ParseDeadLetters reads a DeadLetterQuery.
func ParseDeadLetters(v url.Values) (operations.DeadLetterQuery, error) {
	q := operations.DeadLetterQuery{Source: get(v, "source"), Type: get(v, "type")}
	var err error
	if q.ID, err = number(v, "id"); err != nil {
		return q, err
	}
	if q.Window, err = window(v); err != nil {
		return q, err
	}
	if q.Criteria, err = criteria(v); err != nil {
		return q, err
	}
	q.After, q.Limit, err = page(v, "after")
	return q, err
}

// ActionsValues writes q as a query.
func ActionsValues(q operations.ActionQuery) url.Values {
	v := url.Values{}
	if q.Since > 0 {
		v.Set("since", q.Since.String())
	}
	setInt(v, "before", q.Before)
	setInt(v, "limit", int64(q.Limit))
	return v
}

// ParseActions reads an ActionQuery.
func ParseActions(v url.Values) (operations.ActionQuery, error) {
	var q operations.ActionQuery
	var err error
	if q.Since, err = span(v, "since"); err != nil {
		return q, err
	}
	q.Before, q.Limit, err = page(v, "before")
	return q, err
}

// QuarantineValues writes q as a query.
func QuarantineValues(q operations.QuarantineQuery) url.Values {
	v := url.Values{}
	setText(v, "source", q.Source)
	setWindow(v, q.Window)
	setInt(v, "before", q.Before)
	setInt(v, "limit", int64(q.Limit))
	return v
}

// ParseQuarantine reads a QuarantineQuery.
func ParseQuarantine(v url.Values) (operations.QuarantineQuery, error) {
	q := operations.QuarantineQuery{Source: get(v, "source")}
	var err error
	if q.Window, err = window(v); err != nil {
		return q, err
	}
	q.Before, q.Limit, err = page(v, "before")
	return q, err
}

// QuarantinedValues writes a quarantined delivery's id as a query.
func QuarantinedValues(id int64) url.Values {
	v := url.Values{}
	setInt(v, "id", id)
	return v
}

// ParseQuarantined reads a quarantined delivery's id.
func ParseQuarantined(v url.Values) (int64, error) {
	id, err := number(v, "id")
	if err == nil && id == 0 {
		err = invalidParam("id", "a quarantined delivery's id")
	}
	return id, err
}

func get(v url.Values, k string) string { return strings.TrimSpace(v.Get(k)) }

func setText(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func setInt(v url.Values, k string, n int64) {
	if n != 0 {
		v.Set(k, strconv.FormatInt(n, 10))
	}
}

func setBool(v url.Values, k string, b bool) {
	if b {
		v.Set(k, "1")
	}
}

func setWindow(v url.Values, w operations.Window) {
	if w.Since > 0 {
		v.Set("since", w.Since.String())
	}
	if !w.From.IsZero() {
		v.Set("from", w.From.Format(timeFormat))
	}
	if !w.To.IsZero() {
		v.Set("to", w.To.Format(timeFormat))
	}
}

// timeFormat keeps a time's fractions, so a window travels exactly.
const timeFormat = "2006-01-02T15:04:05.999999999Z07:00"

func window(v url.Values) (operations.Window, error) {
	return operations.ParseWindow(v.Get("since"), v.Get("from"), v.Get("to"))
}

func span(v url.Values, k string) (operations.Span, error) {
	s := get(v, k)
	if s == "" {
		return 0, nil
	}
	d, err := operations.ParseSpan(s)
	if err != nil {
		return 0, invalidParam(k, "a duration such as 30m, 2h or 7d")
	}
	return d, nil
}

// page reads a page's cursor (the key cursor names: before, after) and
// its limit.
func page(v url.Values, cursor string) (int64, int, error) {
	c, err := number(v, cursor)
	if err != nil {
		return 0, 0, err
	}
	n, err := number(v, "limit")
	return c, int(n), err
}

func number(v url.Values, k string) (int64, error) {
	s := get(v, k)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n == 0 && idKeys[k] {
		return 0, invalidParam(k, "a positive whole number")
	}
	return n, nil
}

// idKeys are the keys that name a row (an id, a page's cursor): 0 names
// none, so it is refused rather than read as "not given"; no writer of
// these queries sends it.
var idKeys = map[string]bool{"id": true, "before": true, "after": true}

func flag(v url.Values, k string) (bool, error) {
	switch get(v, k) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, invalidParam(k, "1 or 0")
}
