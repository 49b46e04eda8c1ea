package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

func newDeadLettersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dead-letters",
		Aliases: []string{"dl"},
		Short:   "List the dead letters, and requeue them once the cause is fixed, or resolve them",
	}
	cmd.AddCommand(newDeadLettersListCmd(), newDeadLettersRequeueCmd(), newDeadLettersResolveCmd())
	return cmd
}

// deadLetterFlags select open dead letters: those neither requeued nor
// resolved yet.
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

// selection is the flags' selection; the API reads the window's ends on
// the database's clock.
func (f *deadLetterFlags) selection() (operations.DeadLetterSelection, error) {
	w, err := f.window.window()
	if err != nil {
		return operations.DeadLetterSelection{}, err
	}
	return operations.DeadLetterSelection{ID: f.id, Source: f.source, Type: f.typ, Window: w}, nil
}

func newDeadLettersListCmd() *cobra.Command {
	var (
		f      deadLetterFlags
		c      criteriaFlags
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
			if limit <= 0 || limit > maxListLimit {
				return fmt.Errorf("--limit must be 1 to %d", maxListLimit)
			}
			sel, err := f.selection()
			if err != nil {
				return err
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			q := operations.DeadLetterQuery{ID: sel.ID, Source: sel.Source, Type: sel.Type, Window: sel.Window}
			if q.Criteria, err = c.criteria(); err != nil {
				return err
			}
			var all operations.DeadLetterPage
			all.DeadLetters, all.NextAfter, err = readPages(limit, 0, func(n int, after int64) ([]operations.DeadLetter, *int64, error) {
				q.Limit, q.After = n, after
				p, err := api.DeadLetters(cmd.Context(), q)
				if err != nil {
					return nil, nil, err
				}
				if all.At.IsZero() {
					all.At = p.At
				}
				return p.DeadLetters, p.NextAfter, nil
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, all)
			}
			if len(all.DeadLetters) == 0 {
				fmt.Fprintln(out, "no open dead letters match")
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "ID\tEVENT\tSOURCE\tEVENT ID\tTYPE\tATTEMPTS\tDEAD AT\tLAST ERROR")
			for _, d := range all.DeadLetters {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventPK, d.Source, oneLine(d.EventID, 40),
					oneLine(d.Type, 40), d.Attempts, operations.Stamp(&d.DeadAt), oneLine(deref(d.LastError), 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if all.NextAfter != nil {
				fmt.Fprintf(out, "(first %d shown: narrow the filters or raise --limit)\n", len(all.DeadLetters))
			}
			return nil
		},
	}
	f.register(cmd)
	c.register(cmd, "dead letters'", true)
	cmd.Flags().IntVar(&limit, "limit", 100, fmt.Sprintf("at most this many (up to %d)", maxListLimit))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newDeadLettersRequeueCmd() *cobra.Command {
	var (
		f                   deadLetterFlags
		c                   criteriaFlags
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
requeues them. A large requeue goes on in several calls under one record
(the processor starts on the first events while the rest are requeued).
Without a filter, --all is required.`,
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
			sel, err := f.selection()
			if err != nil {
				return err
			}
			if sel.Criteria, err = c.criteria(); err != nil {
				return err
			}
			sel.All = all
			if !all && sel.ID == 0 && sel.Source == "" && sel.Type == "" && sel.Window.IsZero() && len(sel.IDs) == 0 &&
				sel.Cause == "" && sel.Error == "" && sel.Received.IsZero() {
				// Said in the command's own words (its flags); the API
				// refuses an empty selection all the same.
				return errors.New("give a dead letter's id, --source, --type, a time window, or --all")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			dry := dryRun || !yes
			r := operations.RequeueRequest{Select: sel, DryRun: dry, Reason: by.reason}
			var last *operations.RequeueResult
			total, err := runBulk(cmd, "requeueing", func(cont *operations.ActionCursor) (bulkCall, error) {
				r.Continue = cont
				res, err := api.Requeue(cmd.Context(), r)
				if err != nil {
					return bulkCall{}, err
				}
				last = res
				if res.DryRun {
					return bulkCall{matched: res.Matched}, nil
				}
				return bulkCall{res.Matched, res.Events, res.ActionID, res.Next}, nil
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				res := operations.RequeueResult{DryRun: last.DryRun, Events: total.done, Matched: total.matched, ActionID: total.actionID}
				if dry {
					res.Events = total.matched
				}
				return writeJSON(out, res)
			}
			if dry {
				fmt.Fprintf(out, "dry run: %d events would be requeued", total.matched)
				if !dryRun {
					fmt.Fprint(out, "; run it again with --yes to requeue them")
				}
				fmt.Fprintln(out)
				return nil
			}
			fmt.Fprintf(out, "requeued %d events: due now; 'webhookctl stats' shows the backlog drain\n", total.done)
			return nil
		},
	}
	f.register(cmd)
	c.register(cmd, "dead letters'", true)
	by.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "every open dead letter")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&yes, "yes", false, "requeue: without it, only count")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
