package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

func newSourcesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sources", Short: "Inspect the configured sources; pause and resume one"}
	var base string
	var asJSON bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the sources document and print, per source, the URL to register with the sender",
		Long: `check loads the sources document from WEBHOOK_SOURCES, WEBHOOK_SOURCES_FILE
(or dev/sources.json when neither is set), validates every source exactly as
the receiver does at start-up, and prints each one's kind, number of secrets,
timestamp tolerance, endpoint and webhook URL. It never prints a secret; the
URL of a source with an endpoint_token holds the token (it is the URL to
register with the sender: keep it as private as the sender's settings).

ENDPOINT says where a source is reachable: "token only" (endpoint_token,
untokened_path false), "token, untokened open" (the old /webhooks/<name>
still answers: set untokened_path to false once the sender uses the new
URL), or "untokened" (no endpoint_token: its URL is its guessable name).

A source whose configuration refuses some deliveries by a rule gets a note
under the table (and "note" in JSON): an hmac source whose signed_content
puts {id} next to {body} refuses ids holding the separator between them,
so that no byte can move between the id and the body under one signature.
A template whose parts are not separated at all ("{id}{body}") is refused
here, as at start-up, with the reason (docs/sources/hmac.md).

A source with silent_after says so under the table (and "silent_after" in
JSON): that long without a delivery counts it as silent
(docs/operations.md, "A source went silent").`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources, where, err := checkout.LoadSources(cmd.Context(), envOf(cmd))
			if err != nil {
				return err
			}
			type row struct {
				Name      string `json:"name"`
				Kind      string `json:"kind"`
				Tolerance string `json:"timestamp_tolerance"`
				Endpoint  string `json:"endpoint"`
				URL       string `json:"url"`
				Note      string `json:"note,omitempty"`
				// SilentAfter is the source's silent_after ("" for none).
				SilentAfter string `json:"silent_after,omitempty"`
			}
			var rows []row
			for _, name := range sources.Names() {
				src, _ := sources.Lookup(name)
				tol := "none (the sender signs no timestamp)"
				if t := src.Tolerance(); t > 0 {
					tol = t.String()
				}
				endpoint := "untokened"
				switch {
				case src.HasEndpointToken() && !src.UntokenedPath():
					endpoint = "token only"
				case src.HasEndpointToken():
					endpoint = "token, untokened open"
				}
				silent := ""
				if src.SilentAfter > 0 {
					silent = src.SilentAfter.String()
				}
				rows = append(rows, row{name, src.Kind, tol, endpoint, strings.TrimRight(base, "/") + src.Path(), src.Note, silent})
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"from": where, "sources": rows})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d sources from %s, all valid\n\n", len(rows), where)
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tKIND\tTIMESTAMP TOLERANCE\tENDPOINT\tREGISTER THIS URL")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Tolerance, r.Endpoint, r.URL)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Note != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\nnote: %s: %s\n", r.Name, r.Note)
				}
			}
			for _, r := range rows {
				if r.SilentAfter != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\nsilent after: %s: %s without a delivery counts as silent (SourcesSilentAlarm)\n", r.Name, r.SilentAfter)
				}
			}
			return nil
		},
	}
	check.Flags().StringVar(&base, "base-url", "https://<api-id>.execute-api.<region>.amazonaws.com", "the receiver's public base URL (the stack's WebhookUrl output without /webhooks/{source})")
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(check)
	cmd.AddCommand(newPauseCmds(inbox.PauseSource, nil)...)
	return cmd
}
