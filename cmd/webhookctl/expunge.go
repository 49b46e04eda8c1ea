package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// expungeJSON says what an expunge erases (--dry-run) or erased, and what
// it cannot reach.
type expungeJSON struct {
	DryRun          bool   `json:"dry_run"`
	ID              int64  `json:"id"`
	Source          string `json:"source"`
	EventID         string `json:"event_id"`
	AlreadyExpunged bool   `json:"already_expunged"`
	BodyInPostgres  bool   `json:"body_in_postgres"`
	PayloadStored   bool   `json:"payload_in_postgres"`
	// MetadataStored and LastErrorStored: the row's metadata and a last
	// error text, which may quote the body.
	MetadataStored  bool `json:"metadata_in_postgres"`
	LastErrorStored bool `json:"last_error_in_postgres"`
	// AttemptErrors counts the attempts whose error text is erased.
	AttemptErrors int     `json:"attempt_errors"`
	ArchiveKey    *string `json:"archive_key"`
	// DeadLetterCopies counts the dead letters holding a payload, a body
	// or an error text.
	DeadLetterCopies int `json:"dead_letter_copies"`
	// OrphanObjects and ObjectVersions: what the bucket held besides the
	// archive object's current version (known after the expunge only).
	OrphanObjects  []string   `json:"orphan_objects"`
	ObjectVersions int        `json:"object_versions_deleted"`
	ExpungedAt     *time.Time `json:"expunged_at"`
	// NotReached lists the copies expunge cannot erase.
	NotReached []string `json:"not_reached"`
}

// erasable reports whether an error text is still there to erase.
func erasable(text string) bool { return text != "" && text != storage.Redacted }

// expungePlan reads what an expunge of e would erase in Postgres.
func expungePlan(o *ops, e *inbox.Event) (expungeJSON, error) {
	p := expungeJSON{
		ID: e.ID, Source: e.Source, EventID: e.EventID, AlreadyExpunged: e.ExpungedAt != nil,
		BodyInPostgres: e.Body != nil, PayloadStored: e.Payload != nil, ExpungedAt: e.ExpungedAt,
		MetadataStored: e.Metadata != nil, LastErrorStored: erasable(e.LastError),
		OrphanObjects: []string{}, NotReached: archive.Unreachable,
	}
	if e.ExpungedAt == nil {
		p.ArchiveKey = orNull(e.ArchiveKey)
	}
	ctx := o.cmd.Context()
	atts, err := o.store.AttemptListByEvent(ctx, e.ID)
	if err != nil {
		return p, err
	}
	for _, a := range atts {
		if erasable(a.Error) {
			p.AttemptErrors++
		}
	}
	dls, err := o.store.DeadLetterListByEvent(ctx, e.ID)
	if err != nil {
		return p, err
	}
	for _, d := range dls {
		copied := d.Body != nil || d.Payload != nil || erasable(d.LastError)
		for _, x := range d.Errors {
			copied = copied || erasable(x.Error)
		}
		if copied {
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
in Postgres (the event's body, payload and metadata, every error text of
its history, which may quote the body, and its dead-letter copies) and,
when it is archived, in its S3 object, which is rewritten without the
event's line; older versions of that object and orphan uploads that may
hold a copy are deleted for good. It lists what it cannot reach (handler
logs, handlers' tables, database backups). The event's row stays (id, type,
times, body hash), so a redelivery is still a duplicate and the audit trail
says the event existed. An event erased before it was processed leaves
the drain.

It needs the archiver's settings (ARCHIVE_BUCKET, ARCHIVE_PREFIX, and the
S3_* settings for a local S3) besides DATABASE_URL, and S3 rights the
archiver lacks (s3:DeleteObjectVersion, s3:ListBucketVersions: the
stack's ArchiveExpungePolicy, see docs/archiver.md). --dry-run says what would
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
			rep, err := a.Expunge(ctx, e.Source, e.EventID, by.resolve(o.getenv))
			if err != nil {
				return fmt.Errorf("expunge %s/%s (safe to run again): %w", e.Source, e.EventID, err)
			}
			plan.AttemptErrors, plan.DeadLetterCopies = rep.AttemptErrors, rep.DeadLetters
			plan.MetadataStored, plan.LastErrorStored = rep.Metadata, rep.LastError
			plan.OrphanObjects, plan.ObjectVersions = append([]string{}, rep.Orphans...), rep.Versions
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
		fmt.Fprintf(out, "  already expunged at %s: nothing left to erase in Postgres\n", stamp(p.ExpungedAt))
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
