package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
)

func newSourcesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sources", Short: "Inspect the configured sources"}
	var base string
	var asJSON bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the sources document and print, per source, the URL to register with the sender",
		Long: `check loads the sources document from WEBHOOK_SOURCES, WEBHOOK_SOURCES_FILE
(or dev/sources.json when neither is set), validates every source exactly as
the receiver does at start-up, and prints each one's kind, number of secrets,
timestamp tolerance and webhook URL. It never prints a secret.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources, where, err := devenv.LoadSources(cmd.Context(), envOf(cmd))
			if err != nil {
				return err
			}
			type row struct {
				Name      string `json:"name"`
				Kind      string `json:"kind"`
				Tolerance string `json:"timestamp_tolerance"`
				URL       string `json:"url"`
			}
			var rows []row
			for _, name := range sources.Names() {
				src, _ := sources.Lookup(name)
				tol := "none (the sender signs no timestamp)"
				if t := src.Tolerance(); t > 0 {
					tol = t.String()
				}
				rows = append(rows, row{name, src.Kind, tol, strings.TrimRight(base, "/") + "/webhooks/" + name})
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"from": where, "sources": rows})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d sources from %s, all valid\n\n", len(rows), where)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tKIND\tTIMESTAMP TOLERANCE\tREGISTER THIS URL")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Tolerance, r.URL)
			}
			return tw.Flush()
		},
	}
	check.Flags().StringVar(&base, "base-url", "https://<api-id>.execute-api.<region>.amazonaws.com", "the receiver's public base URL (the stack's WebhookUrl output without /webhooks/{source})")
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(check)
	return cmd
}
