package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

type statsOptions struct {
	window   operations.Span
	asJSON   bool
	watch    bool
	interval time.Duration
	// watchCount stops --watch after that many reports (0: never).
	watchCount int
}

func newStatsCmd() *cobra.Command {
	o := statsOptions{window: operations.Span(time.Hour)}
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
			if o.watch && o.interval <= 0 {
				return fmt.Errorf("--interval must be positive")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			return runStats(cmd.Context(), api, cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().TextVar(&o.window, "window", o.window, "the window of rejections and payload mismatches (a span: 1h, 1d, 7d)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON (one object per report)")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "refresh until interrupted")
	cmd.Flags().DurationVar(&o.interval, "interval", 5*time.Second, "time between refreshes with --watch")
	cmd.Flags().IntVar(&o.watchCount, "watch-count", 0, "stop --watch after this many reports")
	_ = cmd.Flags().MarkHidden("watch-count")
	return cmd
}

// unknownText says why an estimate is unknown, and what makes it known.
func unknownText(r operations.RelationBloat) string {
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

// runStats prints one report, or one per --interval with --watch, each
// one call of the API (one snapshot of the database).
func runStats(ctx context.Context, api operations.API, out io.Writer, opt statsOptions) error {
	clear := opt.watch && !opt.asJSON && isTerminal(out)
	for n := 1; ; n++ {
		r, err := api.Stats(ctx, operations.StatsQuery{Window: opt.window, Storage: true})
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

func printStats(out io.Writer, r *operations.Stats) error {
	now := r.At
	tw := newTable(out)
	fmt.Fprintf(tw, "webhook-inbox at %s (database clock)\n", r.At.UTC().Format(time.RFC3339))

	b := r.Backlog
	fmt.Fprintf(tw, "\nBACKLOG\n")
	fmt.Fprintf(tw, "  unprocessed\t%d\tdue %d, in flight %d, retrying %d, paused %d\n", b.Unprocessed, b.Due, b.InFlight, b.Retrying, b.Paused)
	for _, ps := range r.Pauses {
		fmt.Fprintf(tw, "  paused %s\t%s\tsince %s by %s%s\n", ps.Scope, ps.Name, operations.Ago(now, ps.PausedAt), ps.Actor, reasonNote(ps.Reason))
	}
	if b.OldestDueAt != nil {
		fmt.Fprintf(tw, "  oldest due\tdue since %s\t(a woken processor picks due events up within seconds, a retry within about two minutes of its time, a lost wake-up at the sweep 5 minutes after its receipt; longer means stuck)\n", operations.Ago(now, *b.OldestDueAt))
	} else {
		fmt.Fprintf(tw, "  oldest due\t-\tnothing is due\n")
	}
	if b.OldestReceivedAt != nil {
		fmt.Fprintf(tw, "  oldest unprocessed\treceived %s\t\n", operations.Ago(now, *b.OldestReceivedAt))
	}

	fmt.Fprintf(tw, "\nDEAD LETTERS (open: %d)\n", r.DeadLettersOpen)
	if len(r.DeadLetters) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tTYPE\tCOUNT\tOLDEST\n")
		for _, d := range r.DeadLetters {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", d.Source, d.Type, d.Count, operations.Ago(now, d.OldestDeadAt))
		}
	}

	printSources(tw, r)

	fmt.Fprintf(tw, "\nREJECTIONS (last %s)\n", r.Window)
	if len(r.Rejections) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tCAUSE\tCOUNT\t\n")
		for _, c := range r.Rejections {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t\n", c.Source, c.Cause, c.Count)
		}
	}

	fmt.Fprintf(tw, "\nPAYLOAD MISMATCHES AND SUSPECTED REPLAYS (last %s, recorded ones)\n", r.Window)
	if len(r.PayloadMismatches) == 0 {
		fmt.Fprintf(tw, "  none\n")
	} else {
		fmt.Fprintf(tw, "  SOURCE\tCAUSE\tCOUNT\tLAST\t\n")
		for _, m := range r.PayloadMismatches {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t\n", m.Source, m.Cause, m.Count, operations.Ago(now, m.LastAt))
		}
	}

	a := r.Archive
	fmt.Fprintf(tw, "\nARCHIVE\n")
	fmt.Fprintf(tw, "  archived\t%d events\tin %d objects, %s\n", a.ArchivedEvents, a.Objects, operations.Bytes(a.ObjectBytes))
	oldest := ""
	if a.OldestProcessedAt != nil {
		oldest = ", oldest processed " + operations.Ago(now, *a.OldestProcessedAt)
	}
	fmt.Fprintf(tw, "  in Postgres\t%d processed events\t%d of them processed over %s ago (a run archives those)%s\n", a.Waiting, a.Due, a.MinAge, oldest)
	fmt.Fprintf(tw, "  pending objects\t%d\t(being written, or orphans the next run sweeps)\n", a.PendingObjects)

	fmt.Fprintf(tw, "\nTABLES\n")
	fmt.Fprintf(tw, "  TABLE\tROWS (EST.)\tTABLE\tTOAST\tINDEXES\tTOTAL\n")
	for _, t := range r.Tables {
		rows := "?" // not analyzed yet
		if t.RowsEstimate >= 0 {
			rows = fmt.Sprint(t.RowsEstimate)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, rows,
			operations.Bytes(t.TableBytes), operations.Bytes(t.TOASTBytes), operations.Bytes(t.IndexBytes), operations.Bytes(t.TotalBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Bloat == nil {
		return nil
	}
	return printBloat(out, r.Bloat)
}

// printSources prints each source's last delivery and whether it is
// silent (SourcesSilentAlarm's count).
func printSources(tw io.Writer, r *operations.Stats) {
	now := r.At
	fmt.Fprintf(tw, "\nSOURCES (silent: %d; deliveries recorded to within a minute)\n", r.SourcesSilent)
	if len(r.Sources) == 0 {
		fmt.Fprintf(tw, "  none recorded yet (a receiver records its sources at its first stored delivery)\n")
		return
	}
	fmt.Fprintf(tw, "  SOURCE\tLAST DELIVERY\tSILENT AFTER\tSTATE\n")
	for _, a := range r.Sources {
		last := "none since first seen " + operations.Ago(now, a.FirstSeenAt)
		if a.LastReceivedAt != nil {
			last = operations.Ago(now, *a.LastReceivedAt)
		}
		after, state := "-", "ok"
		if a.SilentAfter > 0 {
			after = a.SilentAfter.String()
		}
		switch {
		case !a.Configured:
			state = "no longer configured"
		case a.Silent:
			state = "SILENT since " + operations.Ago(now, *a.SilentSince)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", a.Source, last, after, state)
	}
}

// printBloat prints the bloat section: every relation with its estimate,
// then what to run for each one flagged.
func printBloat(out io.Writer, b *operations.Bloat) error {
	tw := newTable(out)
	fmt.Fprintf(tw, "\nBLOAT (estimated as of the last VACUUM or ANALYZE; flagged from %.0f%% of a relation of %s or more)\n",
		100*b.ThresholdRatio, operations.Bytes(b.ThresholdMinBytes))
	fmt.Fprintf(tw, "  RELATION\tKIND\tSIZE\tBLOAT\tRATIO\t\n")
	var todo []operations.RelationBloat
	for _, r := range b.Relations {
		name := r.Name
		if r.Kind == string(storage.BloatTOAST) {
			if r.SizeBytes == 0 {
				continue // no value was ever large enough: nothing to show
			}
			name = r.Table + " (TOAST)"
		}
		bloat, ratio, note := "unknown", "-", unknownText(r)
		if r.BloatRatio != nil && r.BloatBytes != nil {
			bloat, ratio, note = operations.Bytes(*r.BloatBytes), fmt.Sprintf("%.0f%%", 100**r.BloatRatio), ""
			switch {
			case r.Over:
				note = "OVER"
			case *r.BloatRatio >= b.ThresholdRatio:
				note = "(under " + operations.Bytes(b.ThresholdMinBytes) + ": not flagged)"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", name, r.Kind, operations.Bytes(r.SizeBytes), bloat, ratio, note)
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

// reasonNote is ": REASON", or nothing without one.
func reasonNote(reason *string) string {
	if reason == nil {
		return ""
	}
	return ": " + oneLine(*reason, 60)
}
