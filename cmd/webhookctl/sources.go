package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/sender"
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
			sources, where, err := loadSources(cmd)
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

func newSendCmd() *cobra.Command {
	var base, id, typ string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "send SOURCE FILE",
		Short: "Sign FILE as SOURCE's sender would and post it to a receiver (default the local one)",
		Long: `send reads FILE (- for standard input) as the raw body, signs it with the
source's first secret exactly as that sender does, posts it to --url and prints
the receiver's answer. For kinds that carry the event id or type in a header
(standard, github, shopify, hmac with header ids), --id (default: a random id)
and --type set them. The easiest way to try the system:

  make dev &
  go run ./cmd/webhookctl send stripe testdata-event.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, _, err := loadSources(cmd)
			if err != nil {
				return err
			}
			src, ok := sources.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no source named %q (configured: %v)", args[0], sources.Names())
			}
			var body []byte
			if args[1] == "-" {
				body, err = readAll(cmd.InOrStdin())
			} else {
				body, err = os.ReadFile(args[1])
			}
			if err != nil {
				return err
			}
			if id == "" {
				id = "evt_" + fmt.Sprint(time.Now().UnixNano())
			}
			req, err := sender.SignEvent(src, body, id, typ, time.Now())
			if err != nil {
				return err
			}
			status, answer, err := req.Post(cmd.Context(), httpClient(), base)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"status": status, "answer": json.RawMessage(answerOrString(answer))})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d %s", status, answer)
			if status >= 300 {
				return fmt.Errorf("the receiver answered %d", status)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "url", "http://127.0.0.1:3000", "receiver base URL")
	cmd.Flags().StringVar(&id, "id", "", "event id, for kinds that send it in a header (default: random)")
	cmd.Flags().StringVar(&typ, "type", "", "event type, for kinds that send it in a header")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
