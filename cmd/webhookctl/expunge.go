package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// expungeJSON says what an expunge erases (--dry-run) or erased.
type expungeJSON struct {
	DryRun           bool       `json:"dry_run"`
	ID               int64      `json:"id"`
	Source           string     `json:"source"`
	EventID          string     `json:"event_id"`
	AlreadyExpunged  bool       `json:"already_expunged"`
	BodyInPostgres   bool       `json:"body_in_postgres"`
	PayloadStored    bool       `json:"payload_in_postgres"`
	ArchiveKey       *string    `json:"archive_key"`
	DeadLetterCopies int        `json:"dead_letter_copies"`
	ExpungedAt       *time.Time `json:"expunged_at"`
}

// expungePlan reads what an expunge of e would erase.
func expungePlan(o *ops, e *inbox.Event) (expungeJSON, error) {
	p := expungeJSON{
		ID: e.ID, Source: e.Source, EventID: e.EventID, AlreadyExpunged: e.ExpungedAt != nil,
		BodyInPostgres: e.Body != nil, PayloadStored: e.Payload != nil, ExpungedAt: e.ExpungedAt,
	}
	if e.ExpungedAt == nil {
		p.ArchiveKey = orNull(e.ArchiveKey)
	}
	dls, err := o.store.DeadLetterListByEvent(o.cmd.Context(), e.ID)
	if err != nil {
		return p, err
	}
	for _, d := range dls {
		if d.Body != nil || d.Payload != nil {
			p.DeadLetterCopies++
		}
	}
	return p, nil
}

func newExpungeCmd() *cobra.Command {
	var dryRun, yes, asJSON bool
	var by actorFlags
	cmd := &cobra.Command{
		Use:   "expunge ID | SOURCE EVENT_ID",
		Short: "Erase one event's body everywhere (privacy request); the row stays for dedup and audit",
		Long: `expunge erases the raw body and payload of one event everywhere, irreversibly:
in Postgres (the event and its dead-letter copies) and, when it is archived,
in its S3 object, which is rewritten without the event's line; orphan
objects that may hold a copy are swept. The event's row stays (id, type,
times, body hash), so a redelivery is still a duplicate and the audit trail
says the event existed. An event erased before it was processed leaves
the drain.

It needs the archiver's settings (ARCHIVE_BUCKET, ARCHIVE_PREFIX, and the
S3_* settings for a local S3) besides DATABASE_URL. The archive bucket must
not keep object versions (see docs/archiver.md). --dry-run says what would
be erased; the real run needs --yes. Running it again is harmless.`,
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
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			e, err := ref.get(ctx, o.store)
			if err != nil {
				return err
			}
			plan, err := expungePlan(o, e)
			if err != nil {
				return err
			}
			plan.DryRun = dryRun
			out := cmd.OutOrStdout()
			if dryRun {
				if asJSON {
					return writeJSON(out, plan)
				}
				printExpunge(out, plan)
				return nil
			}
			cfg, err := o.archiveConfig()
			if err != nil {
				return err
			}
			a, err := o.archiver(cfg)
			if err != nil {
				return err
			}
			if err := a.Expunge(ctx, e.Source, e.EventID, by.resolve(o.getenv)); err != nil {
				return fmt.Errorf("expunge %s/%s (safe to run again): %w", e.Source, e.EventID, err)
			}
			after, err := o.store.EventGetByID(ctx, e.ID)
			if err != nil {
				return err
			}
			plan.ExpungedAt = after.ExpungedAt
			if asJSON {
				return writeJSON(out, plan)
			}
			printExpunge(out, plan)
			return nil
		},
	}
	by.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be erased, change nothing")
	cmd.Flags().BoolVar(&yes, "yes", false, "erase: it cannot be undone")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printExpunge(out io.Writer, p expungeJSON) {
	verb := "erased"
	if p.DryRun {
		verb = "would be erased"
		fmt.Fprintf(out, "dry run: expunge of event %d (%s/%s)\n", p.ID, p.Source, p.EventID)
	} else {
		fmt.Fprintf(out, "expunged event %d (%s/%s) at %s\n", p.ID, p.Source, p.EventID, stamp(p.ExpungedAt))
	}
	if p.AlreadyExpunged {
		fmt.Fprintf(out, "  already expunged at %s: nothing left to erase\n", stamp(p.ExpungedAt))
		return
	}
	if p.BodyInPostgres || p.PayloadStored {
		fmt.Fprintf(out, "  body and payload in Postgres: %s\n", verb)
	}
	if p.ArchiveKey != nil {
		fmt.Fprintf(out, "  archived body in %s: %s (the object is rewritten without it)\n", *p.ArchiveKey, verb)
	}
	fmt.Fprintf(out, "  dead-letter copies: %d %s\n", p.DeadLetterCopies, verb)
	fmt.Fprintf(out, "  kept: the event's row (id, type, times, body hash), so redeliveries stay duplicates\n")
}
