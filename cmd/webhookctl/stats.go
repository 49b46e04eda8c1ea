package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

type statsOptions struct {
	window   time.Duration
	asJSON   bool
	watch    bool
	interval time.Duration
	// watchCount stops --watch after that many reports (tests; 0: never).
	watchCount int
}

func newStatsCmd() *cobra.Command {
	var o statsOptions
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Is anything stuck? Backlog, in-flight leases, retries, dead letters, rejections, mismatches, archive, table sizes and bloat",
		Long: `stats reads, from DATABASE_URL, what an operator checks first:

  - the backlog: unprocessed events, how many are due, in flight (claimed
    under a lease), waiting for a retry, and how long the oldest due event
    has waited (it grows when the processor is not keeping up, or not running);
  - open dead letters by source and type;
  - rejections by source and cause over --window (a sender refused after a
    secret roll shows as signature_mismatch), and payload mismatches;
  - the archive's progress (with ARCHIVE_MIN_AGE, default 7d) and the
    tables' sizes (table, TOAST, indexes);
  - the estimated bloat of each table, TOAST table and index, from the
    planner's statistics (as of the last VACUUM or ANALYZE), with what is
    over the threshold and the command that fixes it (docs/operations.md,
    "Table and index bloat").

Times are the database server's. --watch refreshes every --interval.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o2, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o2.close()
			return runStats(cmd.Context(), o2, cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().DurationVar(&o.window, "window", time.Hour, "the window of rejections and payload mismatches")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON (one object per report)")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "refresh until interrupted")
	cmd.Flags().DurationVar(&o.interval, "interval", 5*time.Second, "time between refreshes with --watch")
	cmd.Flags().IntVar(&o.watchCount, "watch-count", 0, "stop --watch after this many reports")
	_ = cmd.Flags().MarkHidden("watch-count")
	return cmd
}

// statsReport is `stats --json`.
type statsReport struct {
	At                time.Time             `json:"at"`
	WindowSeconds     float64               `json:"window_seconds"`
	Backlog           backlogReport         `json:"backlog"`
	DeadLetters       []deadLetterCountJSON `json:"dead_letters"`
	DeadLettersOpen   int64                 `json:"dead_letters_open"`
	Rejections        []rejectionCountJSON  `json:"rejections"`
	PayloadMismatches []mismatchCountJSON   `json:"payload_mismatches"`
	Archive           archiveReport         `json:"archive"`
	Tables            []tableSizeJSON       `json:"tables"`
	Bloat             bloatReport           `json:"bloat"`
}

type backlogReport struct {
	Unprocessed              int64      `json:"unprocessed"`
	Due                      int64      `json:"due"`
	InFlight                 int64      `json:"in_flight"`
	Retrying                 int64      `json:"retrying"`
	OldestDueAt              *time.Time `json:"oldest_due_at"`
	OldestDueAgeSeconds      float64    `json:"oldest_due_age_seconds"`
	OldestReceivedAt         *time.Time `json:"oldest_received_at"`
	OldestReceivedAgeSeconds float64    `json:"oldest_received_age_seconds"`
}

type deadLetterCountJSON struct {
	Source       string    `json:"source"`
	Type         string    `json:"type"`
	Count        int64     `json:"count"`
	OldestDeadAt time.Time `json:"oldest_dead_at"`
}

type rejectionCountJSON struct {
	Source string `json:"source"`
	Cause  string `json:"cause"`
	Count  int64  `json:"count"`
}

type mismatchCountJSON struct {
	Source string `json:"source"`
	// Cause is payload_mismatch or suspected_replay.
	Cause  inbox.Cause `json:"cause"`
	Count  int64       `json:"count"`
	LastAt time.Time   `json:"last_at"`
}

type archiveReport struct {
	Objects           int64      `json:"objects"`
	ObjectBytes       int64      `json:"object_bytes"`
	ArchivedEvents    int64      `json:"archived_events"`
	PendingObjects    int64      `json:"pending_objects"`
	MinAgeSeconds     float64    `json:"min_age_seconds"`
	Waiting           int64      `json:"waiting"`
	Due               int64      `json:"due"`
	OldestProcessedAt *time.Time `json:"oldest_processed_at"`
}

type tableSizeJSON struct {
	Name string `json:"name"`
	// RowsEstimate is the planner's (-1: the table was never analyzed).
	RowsEstimate int64 `json:"rows_estimate"`
	TableBytes   int64 `json:"table_bytes"`
	TOASTBytes   int64 `json:"toast_bytes"`
	IndexBytes   int64 `json:"index_bytes"`
	TotalBytes   int64 `json:"total_bytes"`
}

// bloatReport is the estimated bloat of the inbox's tables and indexes,
// and the threshold that flags them.
type bloatReport struct {
	ThresholdRatio    float64             `json:"threshold_ratio"`
	ThresholdMinBytes int64               `json:"threshold_min_bytes"`
	Relations         []relationBloatJSON `json:"relations"`
}

type relationBloatJSON struct {
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

// unknownText says why an estimate is unknown, and what makes it known.
func unknownText(r relationBloatJSON) string {
	switch storage.BloatUnknown(r.Unknown) {
	case storage.BloatNotAnalyzed:
		return "not analyzed yet (VACUUM ANALYZE " + r.Table + ")"
	case storage.BloatNoPrivilege:
		return "statistics not readable by this role (run as the owner)"
	case storage.BloatInvalidIndex:
		return "INVALID index"
	case storage.BloatNotBtree:
		return "not a btree: not estimated"
	}
	return r.Unknown
}

func runStats(ctx context.Context, o *ops, out io.Writer, opt statsOptions) error {
	if opt.watch && opt.interval <= 0 {
		return fmt.Errorf("--interval must be positive")
	}
	clear := opt.watch && !opt.asJSON && isTerminal(out)
	for n := 1; ; n++ {
		r, err := collectStats(ctx, o, opt.window)
		if err != nil {
			if opt.watch && ctx.Err() != nil {
				return nil // Ctrl-C during a refresh
			}
			return err
		}
		switch {
		case opt.asJSON:
			err = writeJSON(out, r)
		default:
			if clear {
				fmt.Fprint(raw(out), "\033[H\033[2J") // its own sequence, past the escaping
			} else if n > 1 {
				fmt.Fprintln(out)
			}
			err = printStats(out, r)
		}
		if err != nil {
			return err
		}
		if !opt.watch || (opt.watchCount > 0 && n >= opt.watchCount) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends a watch; it is no failure
		case <-time.After(opt.interval):
		}
	}
}

// archiveMinAge is the archiver's ARCHIVE_MIN_AGE (or its default), for
// what a run would archive now; the rest of the archiver's settings are
// not needed to read the database.
func archiveMinAge(getenv func(string) string) time.Duration {
	// A bad or missing other setting does not matter here; a bad
	// ARCHIVE_MIN_AGE leaves the default.
	cfg, _ := archive.ConfigFromEnv(getenv)
	return cfg.MinAge
}

func collectStats(ctx context.Context, o *ops, window time.Duration) (statsReport, error) {
	var r statsReport
	now, err := o.store.PGNow(ctx)
	if err != nil {
		return r, err
	}
	r.At, r.WindowSeconds = now, window.Seconds()

	b, err := o.store.EventGetBacklogStats(ctx, now)
	if err != nil {
		return r, err
	}
	r.Backlog = backlogReport{
		Unprocessed: b.Count, Due: b.Due, InFlight: b.InFlight, Retrying: b.Retrying,
		OldestDueAt: b.OldestDueAt, OldestDueAgeSeconds: b.OldestDueAge(now).Seconds(),
		OldestReceivedAt: b.OldestCreatedAt,
	}
	if b.OldestCreatedAt != nil {
		r.Backlog.OldestReceivedAgeSeconds = max(0, now.Sub(*b.OldestCreatedAt).Seconds())
	}

	dls, err := o.store.DeadLetterCountByType(ctx)
	if err != nil {
		return r, err
	}
	r.DeadLetters = []deadLetterCountJSON{}
	for _, d := range dls {
		r.DeadLetters = append(r.DeadLetters, deadLetterCountJSON{d.Source, d.EventType, d.Count, d.OldestDeadAt})
		r.DeadLettersOpen += d.Count
	}

	since := now.Add(-window)
	rej, err := o.store.RejectionCountByCause(ctx, since)
	if err != nil {
		return r, err
	}
	r.Rejections = []rejectionCountJSON{}
	for _, c := range rej {
		r.Rejections = append(r.Rejections, rejectionCountJSON{c.Source, string(c.Cause), c.Count})
	}

	mm, err := o.store.PayloadMismatchCountBySource(ctx, since)
	if err != nil {
		return r, err
	}
	r.PayloadMismatches = []mismatchCountJSON{}
	for _, m := range mm {
		r.PayloadMismatches = append(r.PayloadMismatches, mismatchCountJSON{m.Source, m.Cause, m.Count, m.LastAt})
	}

	minAge := archiveMinAge(o.getenv)
	objs, err := o.store.ArchiveObjectGetStats(ctx)
	if err != nil {
		return r, err
	}
	waiting, err := o.store.EventGetArchiveProgress(ctx, now.Add(-minAge))
	if err != nil {
		return r, err
	}
	r.Archive = archiveReport{
		Objects: objs.Objects, ObjectBytes: objs.ObjectBytes, ArchivedEvents: objs.ArchivedEvents, PendingObjects: objs.PendingObjects,
		MinAgeSeconds: minAge.Seconds(), Waiting: waiting.Waiting, Due: waiting.Due, OldestProcessedAt: waiting.OldestProcessedAt,
	}

	sizes, err := o.store.PGTableSizes(ctx)
	if err != nil {
		return r, err
	}
	r.Tables = []tableSizeJSON{}
	for _, t := range sizes {
		r.Tables = append(r.Tables, tableSizeJSON{t.Name, t.Rows, t.Table, t.TOAST, t.Indexes, t.Total})
	}

	bloat, err := o.store.PGBloatEstimate(ctx, storage.InboxTables)
	if err != nil {
		return r, err
	}
	th := storage.DefaultBloatThreshold
	r.Bloat = bloatReport{ThresholdRatio: th.Ratio, ThresholdMinBytes: th.MinBytes, Relations: []relationBloatJSON{}}
	for _, b := range bloat {
		j := relationBloatJSON{
			Table: b.Table, Name: b.Name, Kind: string(b.Kind), SizeBytes: b.Size, Unknown: string(b.Unknown),
			Over: b.Over(th), Remedy: bloatRemedy(b, th),
		}
		if b.Known() {
			j.BloatBytes, j.BloatRatio = new(b.Bytes()), new(b.Ratio())
		}
		r.Bloat.Relations = append(r.Bloat.Relations, j)
	}
	return r, nil
}

func printStats(out io.Writer, r statsReport) error {
	now := r.At
	window := time.Duration(r.WindowSeconds * float64(time.Second))
	tw := newTable(out)
	fmt.Fprintf(tw, "webhook-inbox at %s (database clock)\n", r.At.UTC().Format(time.RFC3339))

	b := r.Backlog
	fmt.Fprintf(tw, "\nBACKLOG\n")
	fmt.Fprintf(tw, "  unprocessed\t%d\tdue %d, in flight %d, retrying %d\n", b.Unprocessed, b.Due, b.InFlight, b.Retrying)
	if b.OldestDueAt != nil {
		fmt.Fprintf(tw, "  oldest due\tdue since %s\t(processors pick due events up within a second, or a schedule tick with real time off; longer means stuck)\n", ago(now, *b.OldestDueAt))
	} else {
		fmt.Fprintf(tw, "  oldest due\t-\tnothing is due\n")
	}
	if b.OldestReceivedAt != nil {
		fmt.Fprintf(tw, "  oldest unprocessed\treceived %s\t\n", ago(now, *b.OldestReceivedAt))
	}

	fmt.Fprintf(tw, "\nDEAD LETTERS (open: %d)\n", r.DeadLettersOpen)
	if len(r.DeadLetters) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tTYPE\tCOUNT\tOLDEST\n")
		for _, d := range r.DeadLetters {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", d.Source, d.Type, d.Count, ago(now, d.OldestDeadAt))
		}
	}

	fmt.Fprintf(tw, "\nREJECTIONS (last %s)\n", span(window))
	if len(r.Rejections) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tCAUSE\tCOUNT\t\n")
		for _, c := range r.Rejections {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t\n", c.Source, c.Cause, c.Count)
		}
	}

	fmt.Fprintf(tw, "\nPAYLOAD MISMATCHES AND SUSPECTED REPLAYS (last %s, recorded ones)\n", span(window))
	if len(r.PayloadMismatches) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tCAUSE\tCOUNT\tLAST\t\n")
		for _, m := range r.PayloadMismatches {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t\n", m.Source, m.Cause, m.Count, ago(now, m.LastAt))
		}
	}

	a := r.Archive
	minAge := time.Duration(a.MinAgeSeconds * float64(time.Second))
	fmt.Fprintf(tw, "\nARCHIVE\n")
	fmt.Fprintf(tw, "  archived\t%d events\tin %d objects, %s\n", a.ArchivedEvents, a.Objects, bytesHuman(a.ObjectBytes))
	oldest := ""
	if a.OldestProcessedAt != nil {
		oldest = ", oldest processed " + ago(now, *a.OldestProcessedAt)
	}
	fmt.Fprintf(tw, "  in Postgres\t%d processed events\t%d of them processed over %s ago (a run archives those)%s\n", a.Waiting, a.Due, span(minAge), oldest)
	fmt.Fprintf(tw, "  pending objects\t%d\t(being written, or orphans the next run sweeps)\n", a.PendingObjects)

	fmt.Fprintf(tw, "\nTABLES\n")
	fmt.Fprintf(tw, "  TABLE\tROWS (EST.)\tTABLE\tTOAST\tINDEXES\tTOTAL\n")
	for _, t := range r.Tables {
		rows := "?" // not analyzed yet
		if t.RowsEstimate >= 0 {
			rows = fmt.Sprint(t.RowsEstimate)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, rows,
			bytesHuman(t.TableBytes), bytesHuman(t.TOASTBytes), bytesHuman(t.IndexBytes), bytesHuman(t.TotalBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printBloat(out, r.Bloat)
}

// printBloat prints the bloat section: every relation with its estimate,
// then what to run for each one flagged.
func printBloat(out io.Writer, b bloatReport) error {
	tw := newTable(out)
	fmt.Fprintf(tw, "\nBLOAT (estimated as of the last VACUUM or ANALYZE; flagged from %.0f%% of a relation of %s or more)\n",
		100*b.ThresholdRatio, bytesHuman(b.ThresholdMinBytes))
	fmt.Fprintf(tw, "  RELATION\tKIND\tSIZE\tBLOAT\tRATIO\t\n")
	var todo []relationBloatJSON
	for _, r := range b.Relations {
		name := r.Name
		if r.Kind == string(storage.BloatTOAST) {
			if r.SizeBytes == 0 {
				continue // no value was ever large enough: nothing to show
			}
			name = r.Table + " (TOAST)"
		}
		bloat, ratio, note := "unknown", "-", unknownText(r)
		if r.BloatRatio != nil {
			bloat, ratio, note = bytesHuman(*r.BloatBytes), fmt.Sprintf("%.0f%%", 100**r.BloatRatio), ""
			switch {
			case r.Over:
				note = "OVER"
			case *r.BloatRatio >= b.ThresholdRatio:
				note = "(under " + bytesHuman(b.ThresholdMinBytes) + ": not flagged)"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", name, r.Kind, bytesHuman(r.SizeBytes), bloat, ratio, note)
		if r.Remedy != "" {
			todo = append(todo, r)
		}
	}
	if len(todo) > 0 {
		fmt.Fprintf(tw, "\n  TO DO\n")
		for _, r := range todo {
			fmt.Fprintf(tw, "  %s:\t%s\n", r.Name, r.Remedy)
		}
	}
	return tw.Flush()
}
