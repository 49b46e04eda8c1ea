package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
)

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
  go run ./cmd/webhookdev send stripe dev/samples/stripe.json

dev/samples/ holds a sample event for each kind, and dev/samples/README.md
the command that sends each.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := checkout.LookupSource(cmd.Context(), os.Getenv, args[0])
			if err != nil {
				return err
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
			fmt.Fprintf(cmd.OutOrStdout(), "%d %s", status, safeAnswer(answer))
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
