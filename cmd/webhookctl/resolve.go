package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// criteriaFlags are the criteria every bulk action takes beside its own
// filters (operations.Criteria): explicit ids, the last attempt's failure
// cause, a text of the last error, and the receipt window.
type criteriaFlags struct {
	ids      []int64
	cause    string
	errText  string
	received timeFlags
}

// register adds the flags; received names the receipt window's flags
// (--received-since... where --since is another window; --since... where
// the receipt window is the command's only one).
func (c *criteriaFlags) register(cmd *cobra.Command, what string, received bool) {
	cmd.Flags().Int64SliceVar(&c.ids, "ids", nil, "only these "+what+" ids (comma-separated, at most "+strconv.Itoa(operations.MaxIDs)+")")
	cmd.Flags().StringVar(&c.cause, "cause", "", "only events whose last attempt failed with this cause (handler_failed, handler_timeout...)")
	cmd.Flags().StringVar(&c.errText, "error", "", "only events whose last error contains this text (case-insensitive)")
	if received {
		cmd.Flags().StringVar(&c.received.since, "received-since", "", "received in the last SPAN (e.g. 2h, 1d)")
		cmd.Flags().StringVar(&c.received.from, "received-from", "", "received at or after this time (RFC 3339, or a date)")
		cmd.Flags().StringVar(&c.received.to, "received-to", "", "received before this time (RFC 3339, or a date)")
	} else {
		c.received.register(cmd, "received")
	}
}

func (c *criteriaFlags) criteria() (operations.Criteria, error) {
	w, err := c.received.window()
	return operations.Criteria{IDs: c.ids, Cause: c.cause, Error: c.errText, Received: w}, err
}

// bulkCall is one call of a requeue, a resolve or a discard, reduced to what the
// loop needs: the whole selection's count (first call), what the call
// changed, its record, and where the next call goes on.
type bulkCall struct {
	matched, done int
	actionID      int64
	next          *operations.ActionCursor
}

// runBulk calls the action until it is done, each call continuing the one
// before under the same record, with a progress bar; it returns the whole
// action's count, what every call changed, and the record. An error after
// the first call says how far the action got: the record says the same.
func runBulk(cmd *cobra.Command, what string, call func(cont *operations.ActionCursor) (bulkCall, error)) (bulkCall, error) {
	total, err := call(nil)
	if err != nil {
		return total, err
	}
	b := newBar(cmd, int64(total.matched), what)
	b.Set(total.done)
	defer b.Done()
	for next := total.next; next != nil; {
		more, err := call(next)
		if err != nil {
			// What was changed no longer matches the selection (a
			// requeued or resolved dead letter is not open, a discarded
			// event not due), so the same command run again acts on the
			// rest, under a record of its own.
			return total, fmt.Errorf("the %s stopped after %d of %d events (recorded as action %d; the same command run again acts on the rest): %w",
				what, total.done, total.matched, total.actionID, err)
		}
		total.done += more.done
		b.Set(total.done)
		next = more.next
	}
	total.next = nil
	return total, nil
}

// bulkFlags are the flags a requeue, a resolve and a discard take beside
// their selection's: --all, who and why, and how to run.
type bulkFlags struct {
	by  actorFlags
	all bool
	// dryRun is --dry-run; without --yes, a command only counts too.
	dryRun, yes, asJSON bool
	// expect is --expect: the first call checks it.
	expect int
}

// register adds the flags: every says what --all selects; verb and past
// name the action.
func (b *bulkFlags) register(cmd *cobra.Command, every, verb, past string) {
	b.by.register(cmd)
	cmd.Flags().BoolVar(&b.all, "all", false, every)
	cmd.Flags().IntVar(&b.expect, "expect", 0, "the count the dry run showed: nothing is "+past+" if the selection now counts otherwise")
	cmd.Flags().BoolVar(&b.dryRun, "dry-run", false, "count, change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&b.yes, "yes", false, verb+": without it, only count")
	cmd.Flags().BoolVar(&b.asJSON, "json", false, "print JSON")
}

// dry reports a run that only counts: --dry-run, or no --yes.
func (b *bulkFlags) dry() bool { return b.dryRun || !b.yes }

// bulkWords are the words a bulk command's output uses: gerund names the
// progress bar; would ends "N events would be …"; verb is the action's
// and past its past tense; done says what became of the events.
type bulkWords struct {
	gerund, would, verb, past, done string
}

// confirmBulk runs a requeue, a resolve or a discard to its end (runBulk:
// each call continuing the one before, --expect checked by the first) and
// prints it: the count of a dry run and how to go on, or what the action
// did.
func confirmBulk(cmd *cobra.Command, b *bulkFlags, w bulkWords, call func(cont *operations.ActionCursor, expect *int) (bulkCall, error), jsonOf func(bulkCall) any) error {
	expect := flagged(cmd, "expect", b.expect)
	total, err := runBulk(cmd, w.gerund, func(cont *operations.ActionCursor) (bulkCall, error) {
		if cont != nil {
			return call(cont, nil)
		}
		return call(nil, expect)
	})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if b.asJSON {
		return writeJSON(out, jsonOf(total))
	}
	if b.dry() {
		fmt.Fprintf(out, "dry run: %d events would be %s", total.matched, w.would)
		if !b.dryRun {
			fmt.Fprintf(out, "; run it again with --yes --expect %d --reason '...' to %s them", total.matched, w.verb)
		}
		fmt.Fprintln(out)
		return nil
	}
	fmt.Fprintf(out, "%s %d events (of %d matched): %s; recorded as action %d\n", w.past, total.done, total.matched, w.done, total.actionID)
	return nil
}

// flagged returns &v when the flag name was given, else nil.
func flagged(cmd *cobra.Command, name string, v int) *int {
	if cmd.Flags().Changed(name) {
		return &v
	}
	return nil
}

func newDeadLettersResolveCmd() *cobra.Command {
	var (
		f deadLetterFlags
		c criteriaFlags
		b bulkFlags
	)
	cmd := &cobra.Command{
		Use:   "resolve [ID]",
		Short: "Close dead letters without running their events again (one, or by filter); without --yes, says how many",
		Long: `resolve closes the open dead letters matching the filters (or the one whose
id is given) without running their events again: when the event is one
you meant to drop (a duplicate, a test, an order cancelled since). Each
dead letter keeps its copy, marked resolved; its event is finished as it
stands, with outcome resolved (its body is archived as any other's, and
'webhookctl replay ID' can still run it). Resolved dead letters are no
longer open: they leave the lists, the open counts, the processor's
DeadLettersOpen gauge and so its alarm.

--reason is required, and recorded with who ran it (--actor): 'webhookctl
actions' lists it with its filter and the events it closed.

Without --yes (or with --dry-run) it only counts what a resolve would
close, with the same filter, and changes nothing; --yes resolves, unless
the count differs from --expect (the count you saw) when it is given. A
large resolve goes on in several calls under one record. Without a
filter, --all is required.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := f.actionSelection(args, &c, b.all)
			if err != nil {
				return err
			}
			if !b.dry() && b.by.reason == "" {
				return errors.New("--reason is required: say why these events will never run")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			r := operations.ResolveRequest{Select: sel, DryRun: b.dry(), Reason: b.by.reason}
			return confirmBulk(cmd, &b, bulkWords{gerund: "resolving", would: "resolved (closed without running again)", verb: "resolve",
				past: "resolved", done: "their dead letters are closed"},
				func(cont *operations.ActionCursor, expect *int) (bulkCall, error) {
					r.Continue, r.Expect = cont, expect
					res, err := api.Resolve(cmd.Context(), r)
					if err != nil {
						return bulkCall{}, err
					}
					return bulkCall{res.Matched, res.Resolved, res.ActionID, res.Next}, nil
				},
				func(t bulkCall) any {
					return operations.ResolveResult{DryRun: r.DryRun, Matched: t.matched, Resolved: t.done, ActionID: t.actionID}
				})
		},
	}
	f.register(cmd)
	c.register(cmd, "dead letters'", true)
	b.register(cmd, "every open dead letter", "resolve", "resolved")
	return cmd
}

func newEventsDiscardCmd() *cobra.Command {
	var (
		id          int64
		source, typ string
		c           criteriaFlags
		b           bulkFlags
	)
	cmd := &cobra.Command{
		Use:   "discard [ID]",
		Short: "Make unprocessed events never run (one, or by filter); without --yes, says how many",
		Long: `discard finishes the unprocessed events matching the filters (or the one whose
id is given) without running them: pending, retrying and in-flight events,
never dead ones (resolve those: 'dead-letters resolve'). Each is finished
with outcome discarded: no processor claims it again. One a processor is
running when the discard reaches it is waited for: if the processor
processed it, it ran first and is not discarded; otherwise it never runs.
Its body stays and is archived as any other's; 'webhookctl replay ID' can
still run it.

--reason is required, and recorded with who ran it (--actor): 'webhookctl
actions' lists it with its filter and the events it finished.

Without --yes (or with --dry-run) it only counts what a discard would
finish, with the same filter, and changes nothing; --yes discards, unless
the count differs from --expect when it is given. --since/--from/--to are
the time received, as in 'events list'. A large discard goes on in
several calls under one record. Without a filter, --all is required.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := idArg(args, &id, "an event"); err != nil {
				return err
			}
			crit, err := c.criteria()
			if err != nil {
				return err
			}
			sel := operations.DiscardSelection{ID: id, Source: source, Type: typ, Criteria: crit, All: b.all}
			if sel.IsZero() {
				return errors.New("give an event's id, --ids, --source, --type, --cause, --error, a time window, or --all")
			}
			if !b.dry() && b.by.reason == "" {
				return errors.New("--reason is required: say why these events must never run")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			r := operations.DiscardRequest{Select: sel, DryRun: b.dry(), Reason: b.by.reason}
			return confirmBulk(cmd, &b, bulkWords{gerund: "discarding", would: "discarded (never run)", verb: "discard", past: "discarded",
				done: "they will never run"},
				func(cont *operations.ActionCursor, expect *int) (bulkCall, error) {
					r.Continue, r.Expect = cont, expect
					res, err := api.Discard(cmd.Context(), r)
					if err != nil {
						return bulkCall{}, err
					}
					return bulkCall{res.Matched, res.Discarded, res.ActionID, res.Next}, nil
				},
				func(t bulkCall) any {
					return operations.DiscardResult{DryRun: r.DryRun, Matched: t.matched, Discarded: t.done, ActionID: t.actionID}
				})
		},
	}
	cmd.Flags().Int64Var(&id, "id", 0, "one event, by its id")
	cmd.Flags().StringVar(&source, "source", "", "only this source")
	cmd.Flags().StringVar(&typ, "type", "", "only this event type")
	c.register(cmd, "events'", false)
	b.register(cmd, "every unprocessed event", "discard", "discarded")
	return cmd
}
