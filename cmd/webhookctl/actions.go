package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// EnvActor names who runs webhookctl when --actor does not: a CI job or a
// shared operator host sets it once.
const EnvActor = "WEBHOOKCTL_ACTOR"

// actorFlags are --actor and --reason, which every command that changes
// events (replay, dead-letters requeue, expunge) records with its action.
type actorFlags struct {
	actor, reason string
}

func (a *actorFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.actor, "actor", "", "who you are, recorded with the action (default $"+EnvActor+", else user@host)")
	cmd.Flags().StringVar(&a.reason, "reason", "", "why, recorded with the action (an incident or ticket, say)")
}

// name is who acts: --actor, else $WEBHOOKCTL_ACTOR, else the operating
// system's user at this host.
func (a *actorFlags) name(getenv func(string) string) string {
	name := strings.TrimSpace(a.actor)
	if name == "" {
		name = strings.TrimSpace(getenv(EnvActor))
	}
	if name == "" {
		who := "unknown"
		if u, err := user.Current(); err == nil && u.Username != "" {
			who = u.Username
		}
		host, _ := os.Hostname()
		name = who + "@" + host
	}
	return name
}

func newActionsCmd() *cobra.Command {
	var (
		since string
		l     listFlags
	)
	cmd := &cobra.Command{
		Use:   "actions",
		Short: "The operator actions recorded: every replay, requeue and expunge, who ran it and on how many events",
		Long: `actions lists the operator actions, newest first: each replay, dead-letters
requeue and expunge records who ran it (--actor, $` + EnvActor + `, else
user@host), the database role it ran as, when, its filter, its reason and
how many events it changed, in the statements that change them.
'webhookctl events show' lists the actions that touched one event.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			q := operations.ActionQuery{}
			if since != "" {
				s, err := operations.ParseSpan(since)
				if err != nil {
					return fmt.Errorf("--since: %w", err)
				}
				q.Since = s
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			var all operations.ActionPage
			all.Actions, all.NextBefore, all.At, err = readPages(l.limit, 0, func(n int, before int64) (*operations.ActionPage, error) {
				q.Limit, q.Before = n, before
				return api.Actions(cmd.Context(), q)
			}, func(p *operations.ActionPage) ([]operations.Action, *int64, time.Time) {
				return p.Actions, p.NextBefore, p.At
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if l.asJSON {
				return writeJSON(out, all)
			}
			if len(all.Actions) == 0 {
				fmt.Fprintln(out, "no operator actions recorded")
				return nil
			}
			return printActions(out, all.Actions)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only actions of the last SPAN (e.g. 24h, 7d)")
	l.register(cmd, 50)
	return cmd
}

// printActions prints actions as a table; every text in it is the
// operator's own or the database's, escaped all the same.
func printActions(out io.Writer, acts []operations.Action) error {
	tw := newTable(out)
	fmt.Fprintln(tw, "  ID\tAT\tACTION\tEVENTS\tACTOR\tDB ROLE\tFILTER\tREASON")
	for _, a := range acts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", strconv.FormatInt(a.ID, 10), operations.Stamp(&a.At), a.Action, a.Events,
			oneLine(a.Actor, 40), oneLine(a.DBUser, 30), oneLine(string(a.Filter), 80), orDash(oneLine(deref(a.Reason), 60)))
	}
	return tw.Flush()
}
