package operations

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// Search by content: the events list's Match (JSON the payload contains)
// and Header (a header a kind keeps in the metadata) filters. No index
// serves them (a GIN index on the payload would tax every insert of the
// ingest path), so a search walks the window newest first in chunks on
// the primary key, tests each chunk's rows, and stops at a page of
// matches or at its budget of rows or time, whichever comes first: the
// page then says how far down it searched and where to continue.
const (
	// MaxMatchBytes bounds a Match document.
	MaxMatchBytes = 4096
	// DefaultSearchWindow is the receipt window of a search that names no
	// lower bound: the last day (or the day before To).
	DefaultSearchWindow = Span(24 * time.Hour)
)

// The budget of one search request. A chunk of searchChunk rows reads
// their payloads (out of line, one TOAST fetch each); the request stops
// after searchRows rows or searchTime, well within the console's 100 ms
// (docs/benchmarks.md measures it), and the page's cursor continues.
const (
	searchChunk = 1000
	searchRows  = 50000
	searchTime  = 40 * time.Millisecond
)

// budget is how much one search request may read.
type budget struct {
	rows, chunk int
	time        time.Duration
}

var defaultBudget = budget{rows: searchRows, chunk: searchChunk, time: searchTime}

// Search is how far a search by content got (EventPage.Search).
type Search struct {
	// From and To are the receipt window searched (To zero: up to now).
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
	// DownTo is the receipt time the search reached: every event of the
	// window received at or after it (and below the request's Before) was
	// searched. Complete says the whole window was, down to From.
	DownTo   time.Time `json:"down_to"`
	Complete bool      `json:"complete"`
	// Scanned is how many events this request read.
	Scanned int `json:"scanned"`
}

// searching reports whether q searches by content.
func (q EventQuery) searching() bool { return q.Match != "" || q.Header != "" }

// searchFilter checks q's Match and Header and returns the containment
// documents for the payload and the metadata ("" for none).
func (q EventQuery) searchFilter() (match, metadata string, err error) {
	if m := strings.TrimSpace(q.Match); m != "" {
		if match, err = matchDoc(m); err != nil {
			return "", "", err
		}
	}
	if h := strings.TrimSpace(q.Header); h != "" {
		if metadata, err = headerDoc(h); err != nil {
			return "", "", err
		}
	}
	return match, metadata, nil
}

// matchDoc checks a Match document: JSON of at most MaxMatchBytes, an
// object or an array (a payload is one; a scalar would match only a
// payload that is that scalar), compacted.
func matchDoc(m string) (string, error) {
	const example = `give the JSON the payload must contain, such as {"customer":"cus_123"} or {"data":{"object":{"amount":1000}}}`
	if len(m) > MaxMatchBytes {
		return "", invalid("match: %d bytes, at most %d: %s", len(m), MaxMatchBytes, example)
	}
	if !json.Valid([]byte(m)) {
		return "", invalid("match: not JSON: %s", example)
	}
	if m[0] != '{' && m[0] != '[' {
		return "", invalid("match: a JSON object or array, not %s: %s", inbox.EscapeControls(m, ""), example)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(m)); err != nil {
		return "", invalid("match: not JSON: %s", example)
	}
	return b.String(), nil
}

// headerDoc turns "NAME=VALUE" into the metadata the kind that keeps the
// header NAME stores it as, or refuses a header no kind keeps, saying
// which can be searched.
func headerDoc(h string) (string, error) {
	name, value, ok := strings.Cut(h, "=")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || value == "" {
		return "", invalid("header: give NAME=VALUE, such as X-GitHub-Hook-ID=123456")
	}
	if len(value) > inbox.MaxEventIDBytes || strings.ContainsRune(value, 0) {
		return "", invalid("header: the value must be text of at most %d bytes", inbox.MaxEventIDBytes)
	}
	want := http.CanonicalHeaderKey(name)
	var kept []string
	for _, k := range source.MetadataHeaders() {
		if http.CanonicalHeaderKey(k.Header) == want {
			doc, err := json.Marshal(map[string]string{k.Key: value})
			if err != nil {
				return "", err
			}
			return string(doc), nil
		}
		kept = append(kept, k.Header+" ("+k.Kind+")")
	}
	return "", invalid("header: no kind keeps %s; the receiver stores only these headers, which can be searched: %s",
		inbox.EscapeControls(name, ""), strings.Join(kept, ", "))
}

// searchWindow is the window a search walks at now: q's, with a lower
// bound of DefaultSearchWindow when it gives none.
func searchWindow(w Window, now time.Time) (from, to time.Time) {
	from, to = w.Bounds(now)
	if from.IsZero() {
		end := to
		if end.IsZero() {
			end = now
		}
		from = end.Add(-DefaultSearchWindow.Duration())
	}
	return from, to
}

// search walks the window of f (below f.BeforeID) newest first in chunks
// until it has a page of n events matching match and metadata and f's
// state, or its budget is spent, or the window ends. It returns the page
// and, unless the window was searched to its start, the cursor to
// continue from.
func (s *Service) search(ctx context.Context, tx *storage.Tx, f storage.EventFilter, match, metadata string, now time.Time, n int, w Window) ([]*inbox.Event, *int64, *Search, error) {
	from, to := searchWindow(w, now)
	sr := &Search{From: from, To: to}
	walkTo := to
	if walkTo.IsZero() {
		// Events are received up to now; one received in the same
		// instant as this snapshot's start is still inside.
		walkTo = now.Add(time.Microsecond)
	}
	before := f.BeforeID
	if before == 0 {
		before = 1<<63 - 1
	}
	began := time.Now()
	var found []*inbox.Event
	for {
		chunk := min(s.budget.chunk, s.budget.rows-sr.Scanned)
		res, err := tx.EventSearchChunk(ctx, storage.EventSearch{
			CreatedFrom: from, CreatedTo: walkTo, Source: f.Source, EventType: f.EventType,
			Match: match, Metadata: metadata, BeforeID: before, Chunk: chunk,
		})
		if err != nil {
			return nil, nil, nil, err
		}
		sr.Scanned += res.Scanned
		if len(res.Hits) > 0 {
			// The hits judged by state (and outcome) as the list judges
			// them, newest first.
			kept := f
			kept.IDs, kept.BeforeID, kept.CreatedFrom, kept.CreatedTo = res.Hits, 0, time.Time{}, time.Time{}
			evs, err := tx.EventList(ctx, kept, now, len(res.Hits))
			if err != nil {
				return nil, nil, nil, err
			}
			found = append(found, evs...)
		}
		if len(found) > n {
			// More than a page: the next one starts below its last event,
			// and every event above that was searched.
			found = found[:n]
			next := found[n-1].ID
			sr.DownTo = found[n-1].CreatedAt
			return found, &next, sr, nil
		}
		if res.Scanned < chunk {
			sr.DownTo, sr.Complete = from, true
			return found, nil, sr, nil
		}
		// A full page, or the budget spent: the next request continues
		// below the oldest event read, every one above it searched.
		before, sr.DownTo = res.LowestID, res.LowestCreatedAt
		if len(found) == n || sr.Scanned >= s.budget.rows || time.Since(began) >= s.budget.time {
			return found, &before, sr, nil
		}
	}
}
