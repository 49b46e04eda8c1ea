package console

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// maxCauseSeries is how many refusal causes the received chart draws as
// layers of their own; the rest are one layer, "other causes".
const maxCauseSeries = 6

type overviewData struct {
	Now          time.Time
	Window       time.Duration
	Backlog      storage.BacklogStats
	DeadLetters  storage.DeadLetterStats
	DeadByType   []storage.DeadLetterCount
	Rejections   []storage.RejectionCount
	RejectionSum int64
	// Received (accepted and refused, by cause, stacked) and Processing
	// (processed, failed, dead-lettered, lines) over the window.
	Received, Processing chart
	// Archive progress: the manifest's totals, and what waits for the
	// archiver (due: processed more than ArchiveMinAge ago).
	Archive       storage.ArchiveObjectStats
	Waiting       storage.ArchiveProgress
	ArchiveMinAge time.Duration
}

func (d overviewData) at() time.Time { return d.Now }

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := overviewData{Window: s.cfg.Window, ArchiveMinAge: s.cfg.ArchiveMinAge}
	var err error
	if d.Now, err = s.cfg.Store.PGNow(ctx); err != nil {
		s.fail(w, err)
		return
	}
	if d.Backlog, err = s.cfg.Store.EventGetBacklogStats(ctx, d.Now); err != nil {
		s.fail(w, err)
		return
	}
	if d.DeadLetters, err = s.cfg.Store.DeadLetterGetOpenStats(ctx); err != nil {
		s.fail(w, err)
		return
	}
	if d.DeadByType, err = s.cfg.Store.DeadLetterCountByType(ctx); err != nil {
		s.fail(w, err)
		return
	}
	if d.Rejections, err = s.cfg.Store.RejectionCountByCause(ctx, d.Now.Add(-d.Window)); err != nil {
		s.fail(w, err)
		return
	}
	for _, c := range d.Rejections {
		d.RejectionSum += c.Count
	}
	if d.Received, d.Processing, err = s.charts(r, d.Now); err != nil {
		s.fail(w, err)
		return
	}
	if d.Archive, err = s.cfg.Store.ArchiveObjectGetStats(ctx); err != nil {
		s.fail(w, err)
		return
	}
	if d.Waiting, err = s.cfg.Store.EventGetArchiveProgress(ctx, d.Now.Add(-d.ArchiveMinAge)); err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// charts reads the window's counts per bucket: events stored, refusals by
// cause, attempts by outcome.
func (s *Server) charts(r *http.Request, now time.Time) (received, processing chart, err error) {
	ctx := r.Context()
	b := bucketsFor(now, s.cfg.Window)
	n := b.Len()
	events, err := s.cfg.Store.EventCountByBucket(ctx, b)
	if err != nil {
		return received, processing, err
	}
	refused, err := s.cfg.Store.RejectionCountByBucket(ctx, b)
	if err != nil {
		return received, processing, err
	}
	attempts, err := s.cfg.Store.AttemptCountByBucket(ctx, b)
	if err != nil {
		return received, processing, err
	}

	accepted := series{Name: "accepted", Class: "s-accepted", Values: make([]int64, n)}
	for _, e := range events {
		if i := b.Index(e.At); i >= 0 {
			accepted.Values[i] += e.Count
		}
	}
	received = chart{ID: "chart-received", Title: "Received: accepted and refused, by cause", Buckets: b, Stacked: true,
		Series: append([]series{accepted}, causeSeries(refused, b)...),
		Note: "Accepted counts the events stored (a duplicate delivery is not stored and is not counted here: the receiver counts duplicates in its Duplicate metric only). " +
			"Refusals come from the receiver's sample of recent refusals (webhook_rejections): each record counts with the refusals of its source and cause it stood for (suppressed), in the record's bucket."}

	processed := series{Name: "processed", Class: "s-processed", Values: make([]int64, n)}
	failed := series{Name: "failed", Class: "s-failed", Values: make([]int64, n)}
	dead := series{Name: "dead-lettered", Class: "s-dead", Values: make([]int64, n)}
	for _, a := range attempts {
		if i := b.Index(a.At); i >= 0 {
			processed.Values[i] += a.Processed
			failed.Values[i] += a.Failed
			dead.Values[i] += a.Dead
		}
	}
	processing = chart{ID: "chart-processing", Title: "Processing: attempts by outcome", Buckets: b,
		Series: []series{processed, failed, dead},
		Note:   "Attempts by the time they finished: processed (handled, or no handler), failed (to be retried or, on the last attempt, dead-lettered, counted again as dead-lettered). A replay or a requeue processes an event again."}
	return received, processing, nil
}

// causeSeries is a layer per refusal cause, largest first; beyond
// maxCauseSeries the smallest are one layer.
func causeSeries(rows []storage.RejectionBucket, b storage.Buckets) []series {
	n := b.Len()
	byCause := map[string][]int64{}
	totals := map[string]int64{}
	for _, r := range rows {
		i := b.Index(r.At)
		if i < 0 {
			continue
		}
		if byCause[r.Cause] == nil {
			byCause[r.Cause] = make([]int64, n)
		}
		byCause[r.Cause][i] += r.Count
		totals[r.Cause] += r.Count
	}
	causes := make([]string, 0, len(byCause))
	for c := range byCause {
		causes = append(causes, c)
	}
	slices.SortFunc(causes, func(a, b string) int { return cmp.Or(cmp.Compare(totals[b], totals[a]), cmp.Compare(a, b)) })
	var out []series
	for i, c := range causes {
		if i == maxCauseSeries && len(causes) > maxCauseSeries+1 {
			other := series{Name: "refused: other causes", Class: "s-other", Values: make([]int64, n)}
			for _, c := range causes[i:] {
				for j, v := range byCause[c] {
					other.Values[j] += v
				}
			}
			return append(out, other)
		}
		out = append(out, series{Name: "refused: " + c, Class: "s-c" + string(rune('0'+i)), Values: byCause[c]})
	}
	return out
}

// causeNote is what a refusal cause means and what to do about it.
type causeNote struct {
	Means, Do string
}

// causeNotes explains the causes the receiver records in
// webhook_rejections (docs/operations.md, "A sender is refused after a
// secret roll", and docs/security.md). A cause not here is shown as
// recorded, without an explanation.
var causeNotes = map[inbox.Cause]causeNote{
	inbox.CauseUnknownSource: {
		"The URL names no configured source: a typo in the sender's URL, or a source removed or renamed while the sender still delivers. Names that are no source are counted under the source (unknown); the message holds the name requested.",
		"Compare the sender's URL with the sources document (webhookctl sources check); add the source back, or have the sender fix its URL."},
	inbox.CauseEndpointTokenMismatch: {
		"The source has an endpoint token and the URL carries another one, or none while the source's untokened path is closed (untokened_path: false).",
		"Give the sender the URL with the source's current endpoint token; during a token change, open untokened_path until every sender uses the new URL (docs/security.md, An endpoint nobody can guess)."},
	inbox.CauseSignatureMissing: {
		"The request carries no signature header: a proxy strips it, or the sender is not configured to sign.",
		"Check the sender's webhook settings (signing on) and any proxy between it and the receiver."},
	inbox.CauseSignatureMalformed: {
		"The signature header is there but cannot be parsed for the source's kind: the wrong kind configured, or a proxy altering the header.",
		"Check the source's kind in the sources document against the sender's documentation (docs/sources/)."},
	inbox.CauseSignatureMismatch: {
		"No configured secret produced the signature sent: the sender signs with a secret you do not have (a secret roll), or the body was altered on the way.",
		"Get the sender's new secret and put it beside the old one in the source's secrets, store the document, and let new receivers read it (docs/operations.md, A sender is refused after a secret roll)."},
	inbox.CauseTimestampOutOfTolerance: {
		"The signature is good, but its timestamp is outside tolerance_seconds: the sender's (or a proxy's) clock is off, a retry was queued for long, or someone replays a captured delivery.",
		"Ask the sender about its clock and its retry queue; raise tolerance_seconds only if late retries are expected (at most one hour)."},
	inbox.CausePayloadTooLarge: {
		"The body is larger than WEBHOOK_MAX_BODY_BYTES.",
		"If the sender's events are legitimately this large, raise WEBHOOK_MAX_BODY_BYTES for the receiver; otherwise find out what the sender posts."},
	inbox.CauseUnreadableBody: {
		"The body could not be read: the client went away or the connection broke mid-request.",
		"Usually transient: the sender retries. A steady stream points at the network between the sender and the receiver."},
	inbox.CauseUnparsableBody: {
		"The source's kind reads fields from a JSON body and the body is not a JSON object.",
		"Check the source's kind against what the sender posts (a form-encoded sender, a wrong kind)."},
	inbox.CauseMissingEventID: {
		"The delivery has no usable event id (absent, empty, too long, or not valid text); the id is the deduplication key, so it is required.",
		"Check the source's kind and, for hmac sources, its event id header or field against the sender's deliveries."},
	inbox.CauseInvalidEventType: {
		"The event type is too long or not valid text.",
		"Check what the sender sends as its type; the receiver stores at most 255 bytes."},
	inbox.CauseInvalidEvent: {
		"The database refused the event's values as data (not an outage): retrying the same delivery cannot succeed.",
		"Find the request in the receiver's log by its request id and report it: it is a bug or a sender sending what no check foresaw."},
	inbox.CauseDatabaseUnavailable: {
		"The event could not be made durable: the database did not answer (503; the sender retries).",
		"See the database's health and the runbook of a database failover in docs/operations.md."},
	inbox.CauseInternal: {
		"A bug in the receiver (503; the sender retries). Details are in the receiver's log, never sent.",
		"Follow docs/operations.md, A bug: 503 internal: find the log line by its request id."},
	inbox.CauseNotFound: {
		"The path is not a webhook route at all: a scanner, or a sender with a wrong URL.",
		"Nothing, unless a real sender is among them: then fix its URL (/webhooks/<source>)."},
	inbox.CauseMethodNotAllowed: {
		"A request with another method than POST: a scanner, or someone opening the URL in a browser.",
		"Nothing, unless a real sender is among them."},
	inbox.CauseInvalidRequest: {
		"The request could not be turned into an HTTP request (the Lambda adapter's refusal).",
		"Look for the request id in the receiver's log."},
}

func init() { funcs["bytes"] = humanBytes }

// humanBytes writes a size: 512 B, 3.2 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + "KMGTP"[exp:exp+1] + "iB"
}
