package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// replayWarning is printed (to standard error) by every replay, dry or not.
const replayWarning = `WARNING: a replay runs the handlers again for events they already applied.
Handlers must tolerate it: their database changes are made again in a new
transaction (write merges and upserts keyed by the event or the sender's
object, not blind inserts), and any effect outside the database (an email,
an API call) happens again unless it is idempotent (keyed by the event id).`

func newReplayCmd() *cobra.Command {
	var (
		id                   int64
		source, typ, outcome string
		window               timeFlags
		c                    criteriaFlags
		all, dryRun, yes     bool
		asJSON               bool
		by                   actorFlags
	)
	cmd := &cobra.Command{
		Use:   "replay [ID]",
		Short: "Send processed events through the processor again, by filter (--dry-run says how many)",
		Long: `replay makes the processed events matching the filters unprocessed and due at
once, so the processor applies them again with the handlers deployed now:
after a handler bug was fixed (--from/--to: the window it was live, on the
time of processing), or for events that came before their handler
(--outcome unhandled).

` + replayWarning + `

Each replayed event starts a new run: its failures, last error, outcome and
processed_at are reset, while its attempts and their history stay (webhookctl
events show lists them; the replay's attempts come after). Archived events
are replayed too: the processor reads each body back from its archive
object in S3 (a ranged read, verified against the SHA-256 recorded at
receipt) and hands the handler exactly the body it had before archiving.
Expunged events are never replayed. The replay is recorded with who ran it
(--actor, $WEBHOOKCTL_ACTOR, else user@host) and why (--reason), and each event
it reset is linked to that record: 'webhookctl actions' lists them.

--dry-run counts with the same filter and changes nothing; the real run
needs --yes and resets the events in chunks, so the processor starts on
the first ones at once.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := idArg(args, &id, "an event"); err != nil {
				return err
			}
			if !dryRun {
				if err := confirmDestructive(yes, "replay runs handlers again"); err != nil {
					return err
				}
			}
			w, err := window.window()
			if err != nil {
				return err
			}
			crit, err := c.criteria()
			if err != nil {
				return err
			}
			sel := operations.ReplaySelection{ID: id, Source: source, Type: typ, Outcome: outcome, Window: w, Criteria: crit, All: all}
			if sel.IsZero() {
				// Said in the command's own words (its flags); the API
				// refuses an empty selection all the same.
				return errors.New("give an event's id, --source, --type, --outcome, a time window, or --all")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			fmt.Fprintln(cmd.ErrOrStderr(), replayWarning)
			res, err := replay(cmd, api, operations.ReplayRequest{Select: sel, DryRun: dryRun, Reason: by.reason})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, res)
			}
			archived := ""
			if res.Archived > 0 {
				archived = fmt.Sprintf(" (%d of them archived: the processor reads their bodies back from S3)", res.Archived)
			}
			if dryRun {
				fmt.Fprintf(out, "dry run: %d events would be replayed%s\n", res.Matched, archived)
				return nil
			}
			fmt.Fprintf(out, "replayed %d events (of %d matched): due now%s; recorded as action %d\n", res.Replayed, res.Matched, archived, res.ActionID)
			return nil
		},
	}
	cmd.Flags().Int64Var(&id, "id", 0, "one event, by its id")
	cmd.Flags().StringVar(&source, "source", "", "only this source")
	cmd.Flags().StringVar(&typ, "type", "", "only this event type")
	cmd.Flags().StringVar(&outcome, "outcome", "", "only events processed with this outcome: handled, unhandled, or (named explicitly) discarded or resolved")
	window.register(cmd, "processed")
	c.register(cmd, "events'", true)
	cmd.Flags().BoolVar(&all, "all", false, "every processed event (archived ones included)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing")
	cmd.Flags().BoolVar(&yes, "yes", false, "replay: the handlers run again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	by.register(cmd)
	return cmd
}

// replay runs r: a dry run is one call; a replay is a call, then as many
// as it takes to finish (each continuing the one before, Next, under the
// same record), with a progress bar of the events reset. The answer is
// the whole replay's: what the first call matched, what every call reset.
func replay(cmd *cobra.Command, api operations.API, r operations.ReplayRequest) (*operations.ReplayResult, error) {
	ctx := cmd.Context()
	res, err := api.Replay(ctx, r)
	if err != nil || r.DryRun {
		return res, err
	}
	total := *res
	b := newBar(cmd, int64(total.Matched), "replaying")
	b.Set(total.Replayed)
	defer b.Done()
	for next := res.Next; next != nil; {
		r.Continue = next
		more, err := api.Replay(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("the replay stopped after %d of %d events (recorded as action %d): %w",
				total.Replayed, total.Matched, total.ActionID, err)
		}
		total.Replayed += more.Replayed
		b.Set(total.Replayed)
		next = more.Next
	}
	total.Next = nil
	return &total, nil
}
