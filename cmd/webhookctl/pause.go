package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// newPauseCmds are the pause and resume subcommands of 'sources'
// (scope source, a source's name) and 'handlers' (scope handler, a route
// as 'webhookctl handlers' prints it). known, when set, says whether a
// route is compiled into this webhookctl: a pause of one that is not
// gets a note (the deployed processor may still route to it).
func newPauseCmds(scope inbox.PauseScope, known func(string) bool) []*cobra.Command {
	return []*cobra.Command{newPauseCmd(scope, true, known), newPauseCmd(scope, false, nil)}
}

func newPauseCmd(scope inbox.PauseScope, pause bool, known func(string) bool) *cobra.Command {
	var (
		by             actorFlags
		dryRun, asJSON bool
	)
	arg, what, parent := "NAME", "a source", "sources"
	if scope == inbox.PauseHandler {
		arg, what, parent = "ROUTE", "a handler", "handlers"
	}
	use, short := "pause "+arg, "Hold "+what+"'s events back from the processor until it is resumed"
	long := fmt.Sprintf(`pause holds %[1]s's events back from the processor: they are still received,
verified, deduplicated and stored, and wait, no attempt counted, until
'webhookctl %[2]s resume %[3]s'. The pause is recorded with who paused
(--actor) and why (--reason): 'webhookctl actions' lists it, 'webhookctl
stats' and the console's overview show it, and its events list as state
paused. Pausing what is paused is refused. --dry-run counts what the pause
would hold now.`, what, parent, arg)
	if scope == inbox.PauseSource {
		long += `

A source's waiting events (due or waiting for a retry) are held at once;
those arriving later are held as the processor meets them. An event a
processor claimed just before the pause runs once more.`
	} else {
		long += `

ROUTE is a route as 'webhookctl handlers' prints it: "source stripe, type
invoice.paid", "kind github, any type" or "fallback" (quoted, or as
several words). The processor routes events, so a handler's events are
held as it meets them, while the events of other routes, the same
source's included, run. A route the deployed processor never routes to
holds nothing.`
	}
	if !pause {
		use, short = "resume "+arg, "Let a paused "+strings.TrimPrefix(what, "a ")+"'s events run again"
		long = fmt.Sprintf(`resume ends the pause of %[1]s: the events it held are due again when they
were due, or at once if that has passed, with their attempts as they were,
and the processor is woken. The resume is recorded with who (--actor) and
why (--reason). Resuming what is not paused is refused. --dry-run counts
the events the resume would release.`, what)
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := strings.Join(args, " ")
			if scope == inbox.PauseSource && len(args) > 1 {
				return fmt.Errorf("give one source's name, not %d words", len(args))
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			req := operations.PauseRequest{Scope: scope, Name: name, DryRun: dryRun, Reason: by.reason}
			call := api.Pause
			if !pause {
				call = api.Resume
			}
			res, err := call(cmd.Context(), req)
			if err != nil {
				return err
			}
			if known != nil && !res.DryRun && !known(res.Name) {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: no route %q is compiled into this webhookctl ('webhookctl handlers' lists them); a pause of a route the deployed processor does not have holds nothing\n", res.Name)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, res)
			}
			printPause(out, res, pause)
			return nil
		},
	}
	by.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printPause(out interface{ Write([]byte) (int, error) }, res *operations.PauseResult, pause bool) {
	what := fmt.Sprintf("%s %q", res.Scope, res.Name)
	state := "not paused now"
	if res.Paused {
		state = "paused now"
	}
	switch {
	case res.DryRun && pause && res.Scope == inbox.PauseHandler:
		fmt.Fprintf(out, "dry run: pausing %s would hold its events as the processor meets them (%s)\n", what, state)
	case res.DryRun && pause:
		fmt.Fprintf(out, "dry run: pausing %s would hold %d waiting events now (%s)\n", what, res.Events, state)
	case res.DryRun:
		fmt.Fprintf(out, "dry run: resuming %s would release %d events (%s)\n", what, res.Events, state)
	case pause && res.Scope == inbox.PauseHandler:
		fmt.Fprintf(out, "paused %s: its events are held as the processor meets them; 'webhookctl handlers resume' lets them run\n", what)
	case pause:
		fmt.Fprintf(out, "paused %s: %d waiting events held; new ones are stored and wait; 'webhookctl sources resume' lets them run\n", what, res.Events)
	default:
		fmt.Fprintf(out, "resumed %s: %d events released, due at their time or at once\n", what, res.Events)
	}
}
