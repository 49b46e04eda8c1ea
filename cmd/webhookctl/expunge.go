package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func newExpungeCmd() *cobra.Command {
	var dryRun, yes, asJSON bool
	var by actorFlags
	cmd := &cobra.Command{
		Use:   "expunge ID | SOURCE EVENT_ID",
		Short: "Erase one event's body everywhere (privacy request); the row stays for dedup and audit",
		Long: `expunge erases the raw body and payload of one event everywhere, irreversibly:
in Postgres (the event's body, payload and metadata, every error text of
its history, which may quote the body, and its dead-letter copies) and,
when it is archived, in its S3 object, which is rewritten without the
event's line; older versions of that object and orphan uploads that may
hold a copy are deleted for good. It lists what it cannot reach (handler
logs, handlers' tables, database backups). The event's row stays (id, type,
times, body hash), so a redelivery is still a duplicate and the audit trail
says the event existed. An event erased before it was processed leaves
the drain.

Through a stack's operator function (--stack), the acting function does it
with its own rights, recorded under your verified AWS principal. With a
direct path to the database it needs the archiver's settings
(ARCHIVE_BUCKET, ARCHIVE_PREFIX, and the S3_* settings for a local S3)
besides DATABASE_URL, and S3 rights the archiver lacks
(s3:DeleteObjectVersion, s3:ListBucketVersions: docs/archiver.md lists
them). --dry-run says what would be erased; the real run needs --yes.
Running it again is harmless.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseEventRef(args)
			if err != nil {
				return err
			}
			if !dryRun {
				if err := confirmDestructive(yes, "expunge erases a body for ever"); err != nil {
					return err
				}
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			res, err := api.Expunge(cmd.Context(), operations.ExpungeRequest{Event: ref, DryRun: dryRun, Reason: by.reason})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, res)
			}
			printExpunge(out, res)
			return nil
		},
	}
	by.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be erased, change nothing")
	cmd.Flags().BoolVar(&yes, "yes", false, "erase: it cannot be undone")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printExpunge(out io.Writer, p *operations.ExpungeResult) {
	verb := "erased"
	if p.DryRun {
		verb = "would be erased"
		fmt.Fprintf(out, "dry run: expunge of event %d (%s/%s)\n", p.ID, p.Source, p.EventID)
	} else {
		fmt.Fprintf(out, "expunged event %d (%s/%s) at %s\n", p.ID, p.Source, p.EventID, operations.Stamp(p.ExpungedAt))
	}
	if p.AlreadyExpunged {
		fmt.Fprintf(out, "  already expunged at %s: nothing left to erase in Postgres\n", operations.Stamp(p.ExpungedAt))
	} else {
		if p.BodyInPostgres || p.PayloadStored {
			fmt.Fprintf(out, "  body and payload in Postgres: %s\n", verb)
		}
		if p.MetadataStored {
			fmt.Fprintf(out, "  metadata: %s\n", verb)
		}
		if p.LastErrorStored {
			fmt.Fprintf(out, "  last error text: %s (replaced by %s)\n", verb, storage.Redacted)
		}
		fmt.Fprintf(out, "  attempt error texts: %d %s (replaced by %s; attempts and causes kept)\n", p.AttemptErrors, verb, storage.Redacted)
		if p.ArchiveKey != nil {
			fmt.Fprintf(out, "  archived body in %s: %s (the object is rewritten without it)\n", *p.ArchiveKey, verb)
		}
		fmt.Fprintf(out, "  dead-letter copies: %d %s (payload, body, error texts)\n", p.DeadLetterCopies, verb)
	}
	if p.DryRun {
		fmt.Fprintf(out, "  bucket: older versions and orphan uploads holding the event are looked for and deleted\n")
	} else {
		fmt.Fprintf(out, "  bucket: %d orphan objects and %d object versions deleted for good\n", len(p.OrphanObjects), p.ObjectVersions)
	}
	fmt.Fprintf(out, "  kept: the event's row (id, type, times, body hash), so redeliveries stay duplicates\n")
	fmt.Fprintf(out, "  not reached by expunge (see to these yourself):\n")
	for _, u := range p.NotReached {
		fmt.Fprintf(out, "    - %s\n", u)
	}
}
