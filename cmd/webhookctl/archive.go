package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

func newArchiveCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "archive", Short: "Run the archiver now"}
	cmd.AddCommand(newArchiveRunCmd())
	return cmd
}

func newArchiveRunCmd() *cobra.Command {
	var (
		minAge         string
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

It is safe beside the deployed archiver: concurrent archivers take
disjoint batches. Interrupted (Ctrl-C), it stops after rolling back the
batch in flight; what was committed stays archived. --dry-run counts what
a run would archive now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxBatches < 0 {
				return errors.New("--max-batches must not be negative")
			}
			r := operations.ArchiveRunRequest{DryRun: dryRun}
			if minAge != "" {
				s, err := operations.ParseSpan(minAge)
				if err != nil {
					return fmt.Errorf("--min-age: %w", err)
				}
				r.MinAge = s
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			res, runErr := archiveRun(cmd, api, r, maxBatches)
			if res == nil {
				return runErr
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				if err := writeJSON(out, res); err != nil {
					return err
				}
			case dryRun:
				fmt.Fprintf(out, "dry run: %d events processed over %s ago would be archived\n", res.Archivable, res.MinAge)
			default:
				fmt.Fprintf(out, "archived %d events in %d objects (%s of bodies in %s of objects); swept %d orphan objects\n",
					res.Events, res.Objects, operations.Bytes(res.BodyBytes), operations.Bytes(res.ObjectBytes), res.Swept)
				if res.ExpiredObjects > 0 || res.ExpiredEvents > 0 {
					fmt.Fprintf(out, "body retention: removed the bodies of %d events, deleting %d objects past it\n", res.ExpiredEvents, res.ExpiredObjects)
				}
				if res.Truncated {
					fmt.Fprintln(out, "stopped early (--max-batches, or another archiver held the next batch): run it again for the rest")
				}
			}
			return runErr
		},
	}
	cmd.Flags().StringVar(&minAge, "min-age", "", "archive events processed longer ago than this span (default ARCHIVE_MIN_AGE, else 7d)")
	cmd.Flags().IntVar(&maxBatches, "max-batches", 0, "stop after this many objects (0: until none is left)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be archived, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// archiveRun runs r: a dry run is one call; a run is calls of at most
// operations.ArchiveBatchesPerCall objects (and what is left of
// maxBatches; 0: no bound) while the last one stopped with work left and
// still archived something, with a progress bar of the events archived.
// The answer sums the calls (what the first found archivable); with an
// error, it is what was archived before it, if anything.
func archiveRun(cmd *cobra.Command, api operations.API, r operations.ArchiveRunRequest, maxBatches int) (*operations.ArchiveRunResult, error) {
	ctx := cmd.Context()
	if r.DryRun {
		return api.ArchiveRun(ctx, r)
	}
	var total *operations.ArchiveRunResult
	var b *bar
	defer func() { b.Done() }()
	for left := maxBatches; ; {
		r.MaxBatches = operations.ArchiveBatchesPerCall
		if maxBatches > 0 {
			r.MaxBatches = min(r.MaxBatches, left)
		}
		res, err := api.ArchiveRun(ctx, r)
		if res != nil {
			if total == nil {
				// The first call counted what is due: the bar's length.
				total = &operations.ArchiveRunResult{MinAge: res.MinAge, MinAgeSeconds: res.MinAgeSeconds, Archivable: res.Archivable, Keys: []string{}}
				b = newBar(cmd, res.Archivable, "archiving")
			}
			total.Events += res.Events
			total.Objects += res.Objects
			total.ObjectBytes += res.ObjectBytes
			total.BodyBytes += res.BodyBytes
			total.Swept += res.Swept
			total.ExpiredObjects += res.ExpiredObjects
			total.ExpiredEvents += res.ExpiredEvents
			total.Keys = append(total.Keys, res.Keys...)
			total.Truncated = res.Truncated
			b.Add(res.Events)
		}
		if err != nil {
			if total != nil && total.Events > 0 {
				err = fmt.Errorf("archive run failed after %d events: %w", total.Events, err)
			}
			return total, err
		}
		left -= res.Objects
		progress := res.Events > 0 || res.ExpiredObjects > 0 || res.ExpiredEvents > 0
		if !res.Truncated || !progress || (maxBatches > 0 && left <= 0) {
			return total, nil
		}
	}
}
