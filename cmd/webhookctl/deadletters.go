package main

import (
	"errors"
	"fmt"
	"io"
	"time"

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

// actionSelection is the selection of a requeue or a resolve: the flags',
// with an id given as the argument, the criteria and --all; refused when
// it names nothing.
func (f *deadLetterFlags) actionSelection(args []string, c *criteriaFlags, all bool) (operations.DeadLetterSelection, error) {
	if err := idArg(args, &f.id, "a dead letter"); err != nil {
		return operations.DeadLetterSelection{}, err
	}
	sel, err := f.selection()
	if err != nil {
		return sel, err
	}
	if sel.Criteria, err = c.criteria(); err != nil {
		return sel, err
	}
	sel.All = all
	if sel.IsZero() {
		// Said in the command's own words (its flags); the API refuses
		// an empty selection all the same.
		return sel, errors.New("give a dead letter's id, --ids, --source, --type, --cause, --error, a time window, or --all")
	}
	return sel, nil
}

func newDeadLettersListCmd() *cobra.Command {
	var (
		f deadLetterFlags
		c criteriaFlags
		l listFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the open dead letters (not requeued), oldest first, with their last error",
		Long: `list prints the open dead letters matching the filters (all of them without
one), oldest first: the event, its attempts and the last error. The whole
error history is in --json and in 'events show EVENT'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			sel, err := f.selection()
			if err != nil {
				return err
			}
			q := operations.DeadLetterQuery{ID: sel.ID, Source: sel.Source, Type: sel.Type, Window: sel.Window}
			if q.Criteria, err = c.criteria(); err != nil {
				return err
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			var all operations.DeadLetterPage
			all.DeadLetters, all.NextAfter, all.At, err = readPages(l.limit, 0, func(n int, after int64) (*operations.DeadLetterPage, error) {
				q.Limit, q.After = n, after
				return api.DeadLetters(cmd.Context(), q)
			}, func(p *operations.DeadLetterPage) ([]operations.DeadLetter, *int64, time.Time) {
				return p.DeadLetters, p.NextAfter, p.At
			})
			if err != nil {
				return err
			}
			return printList(cmd, l, all, all.DeadLetters, all.NextAfter != nil, "no open dead letters match",
				"ID\tEVENT\tSOURCE\tEVENT ID\tTYPE\tATTEMPTS\tDEAD AT\tLAST ERROR", func(tw io.Writer, d operations.DeadLetter) {
					fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.EventPK, d.Source, oneLine(d.EventID, 40),
						oneLine(d.Type, 40), d.Attempts, operations.Stamp(&d.DeadAt), oneLine(deref(d.LastError), 80))
				})
		},
	}
	f.register(cmd)
	c.register(cmd, "dead letters'", true)
	l.register(cmd, 100)
	return cmd
}

func newDeadLettersRequeueCmd() *cobra.Command {
	var (
		f deadLetterFlags
		c criteriaFlags
		b bulkFlags
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
requeues them, unless the count differs from --expect (the count you saw)
when it is given. A large requeue goes on in several calls under one record
(the processor starts on the first events while the rest are requeued).
Without a filter, --all is required.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := f.actionSelection(args, &c, b.all)
			if err != nil {
				return err
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			r := operations.RequeueRequest{Select: sel, DryRun: b.dry(), Reason: b.by.reason}
			return confirmBulk(cmd, &b, bulkWords{gerund: "requeueing", would: "requeued", verb: "requeue", past: "requeued",
				done: "due now ('webhookctl stats' shows the backlog drain)"},
				func(cont *operations.ActionCursor, expect *int) (bulkCall, error) {
					r.Continue, r.Expect = cont, expect
					res, err := api.Requeue(cmd.Context(), r)
					if err != nil {
						return bulkCall{}, err
					}
					return bulkCall{res.Matched, res.Events, res.ActionID, res.Next}, nil
				},
				func(t bulkCall) any {
					res := operations.RequeueResult{DryRun: r.DryRun, Events: t.done, Matched: t.matched, ActionID: t.actionID}
					if r.DryRun {
						res.Events = t.matched
					}
					return res
				})
		},
	}
	f.register(cmd)
	c.register(cmd, "dead letters'", true)
	b.register(cmd, "every open dead letter", "requeue", "requeued")
	return cmd
}
