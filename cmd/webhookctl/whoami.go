package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

func newWhoamiCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Who your actions are recorded as, whether AWS IAM verified it, what you may do and the database role",
		Long: `whoami says who the replays, requeues and expunges you run are recorded as:
here, the name you declare ($` + EnvActor + `, else user@host; an acting
command's --actor), not verified by anyone; through a stack's operator
function, your AWS principal, verified by IAM. It also says whether you
may act or only read (and count), and the database role the statements
run as, which the records keep too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			id, err := api.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, id)
			}
			how := "declared, not verified: --actor, else $" + EnvActor + ", else user@host"
			if id.Verified {
				how = "verified by AWS IAM"
			}
			may := "reads and counts, and acts: requeue, replay, expunge, archive run"
			if id.Access != operations.AccessAct {
				may = "reads and counts (dry runs) only"
			}
			tw := newTable(out)
			fmt.Fprintf(tw, "operator\t%s\t(%s)\n", orDash(id.Operator), how)
			fmt.Fprintf(tw, "access\t%s\t(%s)\n", id.Access, may)
			fmt.Fprintf(tw, "database role\t%s\t\n", orDash(id.DatabaseRole))
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
