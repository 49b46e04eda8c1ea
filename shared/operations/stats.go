package operations

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// DefaultWindow is the window of refusals and mismatches (and of the
// charts) when a request gives none.
const DefaultWindow = Span(24 * time.Hour)

// MaxWindow is the longest window of counts over time: the refusal
// records are a ring buffer, and the charts' buckets grow with it.
const MaxWindow = Span(90 * 24 * time.Hour)

// StatsQuery asks for the state of the inbox.
type StatsQuery struct {
	// Window is the span of refusals, mismatches and charts that ends
	// now; 0 is DefaultWindow.
	Window Span `json:"window,omitzero"`
	// Charts adds counts over the window, bucket by bucket (the
	// console's overview).
	Charts bool `json:"charts,omitzero"`
	// Storage adds the tables' sizes and their estimated bloat (what
	// `webhookctl stats` shows).
	Storage bool `json:"storage,omitzero"`
}

// Stats is the state of the inbox at one instant, read in one snapshot.
type Stats struct {
	// At is the database's clock when it was read.
	At time.Time `json:"at"`
	// Window and WindowSeconds are the span of the counts over time.
	Window        Span    `json:"window"`
	WindowSeconds float64 `json:"window_seconds"`
	Backlog       Backlog `json:"backlog"`
	// DeadLetters are the open dead letters by source and type, largest
	// first; DeadLettersOpen their sum, OldestDeadAt the earliest.
	DeadLetters     []DeadLetterCount `json:"dead_letters"`
	DeadLettersOpen int64             `json:"dead_letters_open"`
	OldestDeadAt    *time.Time        `json:"oldest_dead_at"`
	// Rejections are the window's refusals by source and cause, largest
	// first (the suppressed ones each record stands for included);
	// RejectionsTotal their sum.
	Rejections        []RejectionCount `json:"rejections"`
	RejectionsTotal   int64            `json:"rejections_total"`
	PayloadMismatches []MismatchCount  `json:"payload_mismatches"`
	Archive           ArchiveProgress  `json:"archive"`
	// Sources are the sources the receivers have recorded, by name: each
	// one's last delivery and, with a silent_after setting, whether it is
	// silent (what SourcesSilentAlarm counts); SourcesSilent their count.
	Sources       []SourceActivity `json:"sources"`
	SourcesSilent int              `json:"sources_silent"`
	// Charts are there when asked (StatsQuery.Charts).
	Charts *Charts `json:"charts,omitempty"`
	// Tables and Bloat are there when asked (StatsQuery.Storage).
	Tables []TableSize `json:"tables,omitempty"`
	Bloat  *Bloat      `json:"bloat,omitempty"`
	// Pauses are the sources and handlers paused now, sources first.
	Pauses []Pause `json:"pauses"`
}

// Backlog is what waits for the processor.
type Backlog struct {
	// Unprocessed is due + in flight + waiting for a retry + paused.
	Unprocessed int64 `json:"unprocessed"`
	Due         int64 `json:"due"`
	InFlight    int64 `json:"in_flight"`
	Retrying    int64 `json:"retrying"`
	// Paused is the part of Unprocessed a pause holds: never due, so
	// never the oldest due event either.
	Paused int64 `json:"paused"`
	// OldestDueAt is when the oldest due event became due: a woken
	// processor picks due events up within seconds, a retry within about
	// two minutes of its time (its wake-up is armed on a whole minute), and
	// an event whose wake-up was lost at the sweep, 5 minutes after its
	// receipt; longer means stuck.
	OldestDueAt              *time.Time `json:"oldest_due_at"`
	OldestDueAgeSeconds      float64    `json:"oldest_due_age_seconds"`
	OldestReceivedAt         *time.Time `json:"oldest_received_at"`
	OldestReceivedAgeSeconds float64    `json:"oldest_received_age_seconds"`
}

// DeadLetterCount is the open dead letters of one source and type.
type DeadLetterCount struct {
	Source       string    `json:"source"`
	Type         string    `json:"type"`
	Count        int64     `json:"count"`
	OldestDeadAt time.Time `json:"oldest_dead_at"`
}

// SourceActivity is one source's deliveries as the receivers record them
// (each container at most once a minute, so a time is right to within a
// minute).
type SourceActivity struct {
	Source string `json:"source"`
	// Configured is false for a source the sources document no longer
	// has: it stays listed with its last delivery, never silent.
	Configured bool `json:"configured"`
	// LastReceivedAt is its newest delivery; null when it has not
	// delivered since a receiver first recorded it (FirstSeenAt).
	LastReceivedAt *time.Time `json:"last_received_at"`
	FirstSeenAt    time.Time  `json:"first_seen_at"`
	// SilentAfter is its setting (0, left out: none); Silent says it has gone
	// longer than that without a delivery, since SilentSince.
	SilentAfter        Span       `json:"silent_after,omitzero"`
	SilentAfterSeconds float64    `json:"silent_after_seconds"`
	Silent             bool       `json:"silent"`
	SilentSince        *time.Time `json:"silent_since,omitempty"`
}

// RejectionCount is the refusals of one source and cause.
type RejectionCount struct {
	Source string      `json:"source"`
	Cause  inbox.Cause `json:"cause"`
	Count  int64       `json:"count"`
}

// MismatchCount is the recorded mismatches of one source and cause
// (payload_mismatch or suspected_replay).
type MismatchCount struct {
	Source string      `json:"source"`
	Cause  inbox.Cause `json:"cause"`
	Count  int64       `json:"count"`
	LastAt time.Time   `json:"last_at"`
}

// ArchiveProgress is what the archive holds and what waits for it.
type ArchiveProgress struct {
	// Objects, ObjectBytes and ArchivedEvents sum the committed objects.
	Objects        int64 `json:"objects"`
	ObjectBytes    int64 `json:"object_bytes"`
	ArchivedEvents int64 `json:"archived_events"`
	// PendingObjects are being written, or orphans the next run sweeps.
	PendingObjects int64 `json:"pending_objects"`
	// MinAge is the archiver's ARCHIVE_MIN_AGE: Waiting counts the
	// processed events whose body is still in Postgres, Due those of them
	// processed longer ago than MinAge (what a run archives now).
	MinAge            Span       `json:"min_age"`
	MinAgeSeconds     float64    `json:"min_age_seconds"`
	Waiting           int64      `json:"waiting"`
	Due               int64      `json:"due"`
	OldestProcessedAt *time.Time `json:"oldest_processed_at"`
}

// Charts are counts over the window, bucket by bucket: each series holds
// one value per bucket.
type Charts struct {
	// Since and Until bound the buckets, each Width long (the last one
	// holds At).
	Since        time.Time `json:"since"`
	Until        time.Time `json:"until"`
	WidthSeconds int64     `json:"width_seconds"`
	// Accepted counts the events stored, by when they were received.
	Accepted []int64 `json:"accepted"`
	// Refused counts the refusals of each cause (the receiver's sample of
	// refusals, each record with those it stood for), largest first.
	Refused []CauseSeries `json:"refused"`
	// Processed, Failed and DeadLettered count attempts by when they
	// finished: processed (handled, or no handler), failed, and the
	// failed ones that dead-lettered their event.
	Processed    []int64 `json:"processed"`
	Failed       []int64 `json:"failed"`
	DeadLettered []int64 `json:"dead_lettered"`
}

// CauseSeries is one refusal cause's count per bucket.
type CauseSeries struct {
	Cause  inbox.Cause `json:"cause"`
	Values []int64     `json:"values"`
}

// Width is the buckets' width.
func (c *Charts) Width() time.Duration { return time.Duration(c.WidthSeconds) * time.Second }

// TableSize is the disk use of one of the inbox's tables.
type TableSize struct {
	Name string `json:"name"`
	// RowsEstimate is the planner's (-1: the table was never analyzed).
	RowsEstimate int64 `json:"rows_estimate"`
	TableBytes   int64 `json:"table_bytes"`
	TOASTBytes   int64 `json:"toast_bytes"`
	IndexBytes   int64 `json:"index_bytes"`
	TotalBytes   int64 `json:"total_bytes"`
}

// Bloat is the estimated bloat of the inbox's tables, TOAST tables and
// indexes, and the threshold that flags them.
type Bloat struct {
	ThresholdRatio    float64         `json:"threshold_ratio"`
	ThresholdMinBytes int64           `json:"threshold_min_bytes"`
	Relations         []RelationBloat `json:"relations"`
}

// RelationBloat is one relation's estimate.
type RelationBloat struct {
	Table string `json:"table"`
	// Name is the relation's; a TOAST table's is pg_toast_<oid>.
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	SizeBytes int64  `json:"size_bytes"`
	// BloatBytes and BloatRatio are null when the estimate is unknown;
	// Unknown then says why.
	BloatBytes *int64   `json:"bloat_bytes"`
	BloatRatio *float64 `json:"bloat_ratio"`
	Unknown    string   `json:"unknown,omitempty"`
	// Over: at or over the threshold; Remedy is then what to run (also
	// set for an invalid index, which is to be dropped).
	Over   bool   `json:"over_threshold"`
	Remedy string `json:"remedy,omitempty"`
}

// Stats reads the state of the inbox in one snapshot.
func (s *Service) Stats(ctx context.Context, q StatsQuery) (*Stats, error) {
	window, err := countWindow(q.Window)
	if err != nil {
		return nil, err
	}
	minAge := s.cfg.ArchiveMinAge
	if minAge <= 0 && s.cfg.Archive != nil {
		minAge = s.cfg.Archive.MinAge
	}
	if minAge <= 0 {
		minAge = archive.DefaultMinAge
	}
	r := &Stats{Window: window, WindowSeconds: window.Duration().Seconds()}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		r.At = now
		since := now.Add(-window.Duration())
		b, err := tx.EventGetBacklogStats(ctx, now)
		if err != nil {
			return err
		}
		r.Backlog = Backlog{
			Unprocessed: b.Count, Due: b.Due, InFlight: b.InFlight, Retrying: b.Retrying, Paused: b.Paused,
			OldestDueAt: b.OldestDueAt, OldestDueAgeSeconds: b.OldestDueAge(now).Seconds(), OldestReceivedAt: b.OldestCreatedAt,
		}
		if b.OldestCreatedAt != nil {
			r.Backlog.OldestReceivedAgeSeconds = max(0, now.Sub(*b.OldestCreatedAt).Seconds())
		}
		pauses, err := tx.PauseList(ctx)
		if err != nil {
			return err
		}
		r.Pauses = pausesOf(pauses)
		dls, err := tx.DeadLetterCountByType(ctx)
		if err != nil {
			return err
		}
		r.DeadLetters = make([]DeadLetterCount, len(dls))
		for i, d := range dls {
			r.DeadLetters[i] = DeadLetterCount{d.Source, d.EventType, d.Count, d.OldestDeadAt}
		}
		open, err := tx.DeadLetterGetOpenStats(ctx)
		if err != nil {
			return err
		}
		r.DeadLettersOpen, r.OldestDeadAt = open.Open, open.OldestDeadAt
		rej, err := tx.RejectionCountByCause(ctx, since)
		if err != nil {
			return err
		}
		r.Rejections = make([]RejectionCount, len(rej))
		for i, c := range rej {
			r.Rejections[i] = RejectionCount{c.Source, c.Cause, c.Count}
			r.RejectionsTotal += c.Count
		}
		mm, err := tx.PayloadMismatchCountBySource(ctx, since)
		if err != nil {
			return err
		}
		r.PayloadMismatches = make([]MismatchCount, len(mm))
		for i, m := range mm {
			r.PayloadMismatches[i] = MismatchCount{m.Source, m.Cause, m.Count, m.LastAt}
		}
		objs, err := tx.ArchiveObjectGetStats(ctx)
		if err != nil {
			return err
		}
		waiting, err := tx.EventGetArchiveProgress(ctx, now.Add(-minAge))
		if err != nil {
			return err
		}
		r.Archive = ArchiveProgress{
			Objects: objs.Objects, ObjectBytes: objs.ObjectBytes, ArchivedEvents: objs.ArchivedEvents, PendingObjects: objs.PendingObjects,
			MinAge: Span(minAge), MinAgeSeconds: minAge.Seconds(), Waiting: waiting.Waiting, Due: waiting.Due, OldestProcessedAt: waiting.OldestProcessedAt,
		}
		acts, err := tx.SourceActivityList(ctx)
		if err != nil {
			return err
		}
		r.Sources = make([]SourceActivity, len(acts))
		for i, a := range acts {
			r.Sources[i] = SourceActivity{
				Source: a.Source, Configured: a.Configured, LastReceivedAt: a.LastReceivedAt, FirstSeenAt: a.SeenAt,
				SilentAfter: Span(a.SilentAfter), SilentAfterSeconds: a.SilentAfter.Seconds(), Silent: a.Silent(now),
			}
			if r.Sources[i].Silent {
				at, _ := a.SilentAt()
				r.Sources[i].SilentSince = &at
				r.SourcesSilent++
			}
		}
		if q.Charts {
			if r.Charts, err = charts(ctx, tx, now, window.Duration()); err != nil {
				return err
			}
		}
		if q.Storage {
			if r.Tables, r.Bloat, err = storageStats(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// countWindow checks the window of counts over time, defaulting 0 to
// DefaultWindow.
func countWindow(w Span) (Span, error) {
	switch {
	case w == 0:
		return DefaultWindow, nil
	case w < 0 || w > MaxWindow:
		return 0, invalid("the window must be positive and at most %s", MaxWindow)
	}
	return w, nil
}

// maxBuckets bounds how many buckets a chart has: a window is cut into
// the smallest of bucketWidths that gives at most this many.
const maxBuckets = 48

// bucketWidths are the widths a window is cut into, round for a reader.
var bucketWidths = []time.Duration{
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 30 * 24 * time.Hour,
}

// BucketsFor cuts the window that ends at now into buckets aligned on
// their width (UTC), the last one holding now: 24 h gives 48 of 30
// minutes, 1 h 30 of 2 minutes.
func BucketsFor(now time.Time, window time.Duration) storage.Buckets {
	width := bucketWidths[len(bucketWidths)-1]
	for _, w := range bucketWidths {
		if (window+w-1)/w <= maxBuckets {
			width = w
			break
		}
	}
	n := (window + width - 1) / width
	until := now.UTC().Truncate(width).Add(width)
	return storage.Buckets{Since: until.Add(-n * width), Until: until, Width: width}
}

// charts reads the window's counts per bucket: events stored, refusals by
// cause, attempts by outcome.
func charts(ctx context.Context, tx *storage.Tx, now time.Time, window time.Duration) (*Charts, error) {
	b := BucketsFor(now, window)
	n := b.Len()
	c := &Charts{Since: b.Since, Until: b.Until, WidthSeconds: int64(b.Width / time.Second),
		Accepted: make([]int64, n), Processed: make([]int64, n), Failed: make([]int64, n), DeadLettered: make([]int64, n), Refused: []CauseSeries{}}
	events, err := tx.EventCountByBucket(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		if i := b.Index(e.At); i >= 0 {
			c.Accepted[i] += e.Count
		}
	}
	refused, err := tx.RejectionCountByBucket(ctx, b)
	if err != nil {
		return nil, err
	}
	byCause := map[inbox.Cause]int{}
	for _, r := range refused {
		i := b.Index(r.At)
		if i < 0 {
			continue
		}
		k, ok := byCause[inbox.Cause(r.Cause)]
		if !ok {
			k = len(c.Refused)
			byCause[inbox.Cause(r.Cause)] = k
			c.Refused = append(c.Refused, CauseSeries{Cause: inbox.Cause(r.Cause), Values: make([]int64, n)})
		}
		c.Refused[k].Values[i] += r.Count
	}
	sortSeries(c.Refused)
	attempts, err := tx.AttemptCountByBucket(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, a := range attempts {
		if i := b.Index(a.At); i >= 0 {
			c.Processed[i] += a.Processed
			c.Failed[i] += a.Failed
			c.DeadLettered[i] += a.Dead
		}
	}
	return c, nil
}

// sortSeries orders the causes largest first, then by name.
func sortSeries(s []CauseSeries) {
	total := func(c CauseSeries) (n int64) {
		for _, v := range c.Values {
			n += v
		}
		return n
	}
	slices.SortFunc(s, func(a, b CauseSeries) int {
		return cmp.Or(cmp.Compare(total(b), total(a)), cmp.Compare(a.Cause, b.Cause))
	})
}

// storageStats reads the tables' sizes and the bloat estimates.
func storageStats(ctx context.Context, tx *storage.Tx) ([]TableSize, *Bloat, error) {
	sizes, err := tx.PGTableSizes(ctx)
	if err != nil {
		return nil, nil, err
	}
	tables := make([]TableSize, len(sizes))
	for i, t := range sizes {
		tables[i] = TableSize{t.Name, t.Rows, t.Table, t.TOAST, t.Indexes, t.Total}
	}
	rels, err := tx.PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		return nil, nil, err
	}
	th := storage.DefaultBloatThreshold
	b := &Bloat{ThresholdRatio: th.Ratio, ThresholdMinBytes: th.MinBytes, Relations: make([]RelationBloat, len(rels))}
	for i, r := range rels {
		j := RelationBloat{
			Table: r.Table, Name: r.Name, Kind: string(r.Kind), SizeBytes: r.Size, Unknown: string(r.Unknown),
			Over: r.Over(th), Remedy: bloatRemedy(r, th),
		}
		if r.Known() {
			j.BloatBytes, j.BloatRatio = new(r.Bytes()), new(r.Ratio())
		}
		b.Relations[i] = j
	}
	return tables, b, nil
}

// bloatRemedy is what an operator runs for r, over the threshold or an
// invalid index ("" otherwise). An index is rebuilt online; a table's
// rebuild locks it, so the docs weigh it first.
func bloatRemedy(r storage.RelationBloat, th storage.BloatThreshold) string {
	switch {
	case r.Unknown == storage.BloatInvalidIndex:
		return fmt.Sprintf("DROP INDEX CONCURRENTLY %s; (left by a failed CONCURRENTLY build: docs/operations.md, \"An index is flagged\")", r.Name)
	case !r.Over(th):
		return ""
	case r.Kind == storage.BloatIndex:
		return fmt.Sprintf("REINDEX INDEX CONCURRENTLY %s;", r.Name)
	default:
		return fmt.Sprintf("tune its autovacuum; to give the space back: pg_repack, or VACUUM FULL %s; (an exclusive lock: read docs/operations.md, \"Table and index bloat\", first)", r.Table)
	}
}

// Refusals read.

// RefusalsQuery asks for the refusals of a window.
type RefusalsQuery struct {
	// Window ends now; 0 is DefaultWindow.
	Window Span `json:"window,omitzero"`
	// Limit is how many of the latest records to list; 0 is
	// DefaultLimit.
	Limit int `json:"limit,omitzero"`
}

// Refusals are the window's refusals by source and cause, and the latest
// records themselves, newest first.
type Refusals struct {
	At            time.Time        `json:"at"`
	Window        Span             `json:"window"`
	WindowSeconds float64          `json:"window_seconds"`
	Counts        []RejectionCount `json:"counts"`
	Total         int64            `json:"total"`
	Recent        []Rejection      `json:"recent"`
}

// Refusals reads the window's refusals in one snapshot.
func (s *Service) Refusals(ctx context.Context, q RefusalsQuery) (*Refusals, error) {
	window, err := countWindow(q.Window)
	if err != nil {
		return nil, err
	}
	n, err := limit(q.Limit)
	if err != nil {
		return nil, err
	}
	r := &Refusals{Window: window, WindowSeconds: window.Duration().Seconds()}
	err = s.read(ctx, func(tx *storage.Tx, now time.Time) error {
		r.At = now
		since := now.Add(-window.Duration())
		counts, err := tx.RejectionCountByCause(ctx, since)
		if err != nil {
			return err
		}
		r.Counts = make([]RejectionCount, len(counts))
		for i, c := range counts {
			r.Counts[i] = RejectionCount{c.Source, c.Cause, c.Count}
			r.Total += c.Count
		}
		recent, err := tx.RejectionList(ctx, since, n)
		if err != nil {
			return err
		}
		r.Recent = rejectionsOf(recent)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
