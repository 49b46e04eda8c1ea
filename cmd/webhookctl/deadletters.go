package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func newDeadLettersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dead-letters",
		Aliases: []string{"dl"},
		Short:   "List the dead letters, and requeue them once the cause is fixed",
	}
	cmd.AddCommand(newDeadLettersListCmd(), newDeadLettersRequeueCmd())
	return cmd
}

// deadLetterFlags select open dead letters: those not requeued yet.
type deadLetterFlags struct {
	id          int64
	source, typ string
	window      timeFlags
}

func (f *deadLetterFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.id, "id", 0, "one dead letter, by its id")
	cmd.Flags().StringVar(&f.source, "source", "", "only this source")
	cmd.Flags().StringVar(&f.typ, "type", "", "only this event type")
	f.window.register(cmd, "dead")
}

// filter returns the storage filter at now (the database's clock).
func (f *deadLetterFlags) filter(o *ops) (storage.DeadLetterFilter, error) {
	now, err := o.store.PGNow(o.cmd.Context())
	if err != nil {
		return storage.DeadLetterFilter{}, err
	}
	from, to, err := f.window.window(now)
	if err != nil {
		return storage.DeadLetterFilter{}, err
	}
	return storage.DeadLetterFilter{ID: f.id, Source: f.source, EventType: f.typ, DeadFrom: from, DeadTo: to}, nil
}

func newDeadLettersListCmd() *cobra.Command {
	var (
		f      deadLetterFlags
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the open dead letters (not requeued), oldest first, with their last error",
		Long: `list prints the open dead letters matching the filters (all of them without
one), oldest first: the event, its attempts and the last error. The whole
error history is in --json and in 'events show EVENT'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 || limit > 10000 {
				return fmt.Errorf("--limit must be 1 to 10000")
			}
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			filter, err := f.filter(o)
			if err != nil {
				return err
			}
			if filter == (storage.DeadLetterFilter{}) {
				filter.All = true // listing everything is harmless
			}
			dls, err := o.store.DeadLetterList(cmd.Context(), filter, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				list := make([]deadLetterJSON, len(dls))
				for i, d := range dls {
					list[i] = deadLetterToJSON(d)
				}
				return writeJSON(out, map[string]any{"dead_letters": list})
			}
			if len(dls) == 0 {
				fmt.Fprintln(out, "no open dead letters match")
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "ID\tEVENT\tSOURCE\tEVENT ID\tTYPE\tATTEMPTS\tDEAD AT\tLAST ERROR")
			for _, d := range dls {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventPK, d.Source, oneLine(d.EventID, 40),
					oneLine(d.Type, 40), d.Attempts, stamp(&d.DeadAt), oneLine(d.LastError, 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(dls) == limit {
				fmt.Fprintf(out, "(first %d shown: narrow the filters or raise --limit)\n", limit)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newDeadLettersRequeueCmd() *cobra.Command {
	var (
		f                   deadLetterFlags
		by                  actorFlags
		all                 bool
		dryRun, yes, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "requeue [ID]",
		Short: "Send dead letters back to the processor (one, or by filter); without --yes, says how many",
		Long: `requeue sends the open dead letters matching the filters (or the one whose
id is given) back to the processor, due at once, each a new run with its failures reset
(its attempts and their history stay, and it runs alone); each dead letter
keeps its copy, marked requeued. The requeue is recorded with who ran it
(--actor) and why (--reason): 'webhookctl actions' lists them.
Fix the cause first (deploy the handler, restore the service it calls):
a requeued event that fails again gets its full retries, then a new dead
letter.

Without --yes (or with --dry-run) it only counts the events a requeue
would send back, with the same filter, and changes nothing; --yes
requeues them. Without a filter, --all is required.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("%q is not a dead letter's id", args[0])
				}
				if f.id != 0 && f.id != id {
					return errors.New("give the id once")
				}
				f.id = id
			}
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			filter, err := f.filter(o)
			if err != nil {
				return err
			}
			filter.All = all
			n, err := o.store.DeadLetterCountRequeueable(ctx, filter)
			if errors.Is(err, storage.ErrEmptyFilter) {
				return errors.New("give a dead letter's id, --source, --type, a time window, or --all")
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if dryRun || !yes {
				if asJSON {
					return writeJSON(out, map[string]any{"dry_run": true, "events": n})
				}
				fmt.Fprintf(out, "dry run: %d events would be requeued", n)
				if !dryRun {
					fmt.Fprint(out, "; run it again with --yes to requeue them")
				}
				fmt.Fprintln(out)
				return nil
			}
			now, err := o.store.PGNow(ctx)
			if err != nil {
				return err
			}
			b := newBar(cmd, int64(n), "requeueing")
			got, err := o.store.DeadLetterRequeue(ctx, filter, now, by.resolve(o.getenv))
			b.Set(got)
			b.Done()
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(out, map[string]any{"dry_run": false, "events": got})
			}
			fmt.Fprintf(out, "requeued %d events: due now; 'webhookctl stats' shows the backlog drain\n", got)
			return nil
		},
	}
	f.register(cmd)
	by.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "every open dead letter")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&yes, "yes", false, "requeue: without it, only count")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
