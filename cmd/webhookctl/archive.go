package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newArchiveCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "archive", Short: "Run the archiver now"}
	cmd.AddCommand(newArchiveRunCmd())
	return cmd
}

// archiveRunJSON is `archive run --json`, the archiver function's summary.
type archiveRunJSON struct {
	DryRun        bool    `json:"dry_run"`
	MinAgeSeconds float64 `json:"min_age_seconds"`
	// Archivable is what the run found to archive when it started.
	Archivable  int64    `json:"archivable"`
	Events      int      `json:"events"`
	Objects     int      `json:"objects"`
	ObjectBytes int64    `json:"object_bytes"`
	BodyBytes   int64    `json:"body_bytes"`
	Swept       int      `json:"swept"`
	Truncated   bool     `json:"truncated"`
	Keys        []string `json:"keys"`
}

func newArchiveRunCmd() *cobra.Command {
	var (
		minAge         time.Duration
		maxBatches     int
		dryRun, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "One archiver pass now, with progress: bodies of events processed long enough ago go to S3",
		Long: `run does what one invocation of the archiver function does, from here: it
archives the bodies of events processed more than ARCHIVE_MIN_AGE ago
(--min-age overrides it), oldest first, one S3 object per batch, then
sweeps orphan objects. It reads the archiver's settings: DATABASE_URL,
ARCHIVE_BUCKET, ARCHIVE_PREFIX, ARCHIVE_BATCH_SIZE, and S3_ENDPOINT,
S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY for a local S3 (in AWS, your
credentials' chain and AWS_REGION).

It is safe beside the scheduled archiver: concurrent archivers take
disjoint batches. Interrupted (Ctrl-C), it stops after rolling back the
batch in flight; what was committed stays archived. --dry-run counts what
a run would archive now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if minAge < 0 || maxBatches < 0 {
				return fmt.Errorf("--min-age and --max-batches must not be negative")
			}
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			cfg, err := o.archiveConfig()
			if err != nil {
				return err
			}
			if minAge > 0 {
				cfg.MinAge = minAge
			}
			now, err := o.store.PGNow(ctx)
			if err != nil {
				return err
			}
			total, err := o.store.EventCountArchivable(ctx, now.Add(-cfg.MinAge))
			if err != nil {
				return err
			}
			res := archiveRunJSON{DryRun: dryRun, MinAgeSeconds: cfg.MinAge.Seconds(), Archivable: total, Keys: []string{}}
			out := cmd.OutOrStdout()
			if dryRun {
				if asJSON {
					return writeJSON(out, res)
				}
				fmt.Fprintf(out, "dry run: %d events processed over %s ago would be archived\n", total, span(cfg.MinAge))
				return nil
			}

			b := newBar(cmd, total, "archiving")
			// The archiver's own settings with the command's overrides; its
			// clock is the database's, as for the count above.
			cfg.MaxBatches = maxBatches
			cfg.OnBatch = func(_ string, events int) { b.Add(events) }
			cfg.Now = func() time.Time { return now }
			a, err := o.archiver(cfg)
			if err != nil {
				return err
			}
			run, runErr := a.RunOnce(ctx)
			b.Done()
			res.Events, res.Objects, res.ObjectBytes, res.BodyBytes = run.Events, run.Batches, run.ObjectBytes, run.BodyBytes
			res.Swept, res.Truncated = run.Swept, run.Truncated
			if run.Keys != nil {
				res.Keys = run.Keys
			}
			if asJSON {
				if err := writeJSON(out, res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "archived %d events in %d objects (%s of bodies in %s of objects); swept %d orphan objects\n",
					res.Events, res.Objects, bytesHuman(res.BodyBytes), bytesHuman(res.ObjectBytes), res.Swept)
				if res.Truncated {
					fmt.Fprintln(out, "stopped early (--max-batches): run it again for the rest")
				}
			}
			if runErr != nil {
				return fmt.Errorf("archive run failed after %d events (nothing of the failed batch was cleared; run it again): %w", res.Events, runErr)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&minAge, "min-age", 0, "archive events processed longer ago than this (default ARCHIVE_MIN_AGE, else 7 days)")
	cmd.Flags().IntVar(&maxBatches, "max-batches", 0, "stop after this many objects (0: until none is left)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be archived, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
