package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
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

// resolve returns the actor to record: --actor, else $WEBHOOKCTL_ACTOR,
// else the operating system's user at this host. The record also keeps
// the database role the command ran as, which nobody chooses.
func (a *actorFlags) resolve(getenv func(string) string) inbox.Actor {
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
	return inbox.Actor{Name: name, Reason: strings.TrimSpace(a.reason)}
}

// actionJSON is one operator action.
type actionJSON struct {
	ID     int64     `json:"id"`
	Action string    `json:"action"`
	Actor  string    `json:"actor"`
	DBUser string    `json:"db_user"`
	At     time.Time `json:"at"`
	Filter any       `json:"filter"`
	Events int       `json:"events"`
	Reason *string   `json:"reason"`
}

func actionToJSON(a inbox.OperatorAction) actionJSON {
	var filter any = map[string]any{}
	_ = json.Unmarshal(a.Filter, &filter) // the column is a JSON object
	return actionJSON{ID: a.ID, Action: a.Action, Actor: a.Actor, DBUser: a.DBUser, At: a.At, Filter: filter, Events: a.Events, Reason: orNull(a.Reason)}
}

func newActionsCmd() *cobra.Command {
	var (
		since  time.Duration
		limit  int
		asJSON bool
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
			if limit < 1 {
				return fmt.Errorf("--limit must be at least 1")
			}
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			var from time.Time
			if since > 0 {
				now, err := o.store.PGNow(ctx)
				if err != nil {
					return err
				}
				from = now.Add(-since)
			}
			acts, err := o.store.OperatorActionList(ctx, from, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				j := make([]actionJSON, len(acts))
				for i, a := range acts {
					j[i] = actionToJSON(a)
				}
				return writeJSON(out, map[string]any{"actions": j})
			}
			if len(acts) == 0 {
				fmt.Fprintln(out, "no operator actions recorded")
				return nil
			}
			return printActions(out, acts)
		},
	}
	cmd.Flags().DurationVar(&since, "since", 0, "only actions of the last duration (e.g. 24h)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printActions prints actions as a table; every text in it is the
// operator's own or the database's, escaped all the same.
func printActions(out io.Writer, acts []inbox.OperatorAction) error {
	tw := newTable(out)
	fmt.Fprintln(tw, "  ID\tAT\tACTION\tEVENTS\tACTOR\tDB ROLE\tFILTER\tREASON")
	for _, a := range acts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", strconv.FormatInt(a.ID, 10), stamp(&a.At), a.Action, a.Events,
			oneLine(a.Actor, 40), oneLine(a.DBUser, 30), oneLine(string(a.Filter), 80), orDash(oneLine(a.Reason, 60)))
	}
	return tw.Flush()
}
