package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
)

func newSampleCmd() *cobra.Command {
	var base string
	var apigw, replayable bool
	cmd := &cobra.Command{
		Use:   "sample SOURCE",
		Short: "Print a curl command that posts a freshly signed sample event to SOURCE",
		Long: `Print a curl command that posts a freshly signed sample event to SOURCE.

A source whose sender signs no timestamp (github, square, shopify, hmac
without timestamp_header) makes a sample that never expires: with secrets
other than the fake ones of dev/sources.json it is refused unless
--replayable says to print it anyway.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, where, err := checkout.LoadSources(cmd.Context(), os.Getenv)
			if err != nil {
				return err
			}
			src, ok := sources.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no source named %q (configured: %v)", args[0], sources.Names())
			}
			if src.Tolerance() == 0 && !checkout.FakeSecrets(where) && !replayable {
				return fmt.Errorf("source %s (kind %s, from %s) signs no timestamp: a sample signed with its real secret stays valid for ever, "+
					"so whoever reads it (a terminal's scroll-back, a CI log, a ticket) can post it once; "+
					"pass --replayable to print it anyway (docs/security.md, Replays and duplicates)", src.Name, src.Kind, where)
			}
			req, err := sender.Sample(src, time.Now())
			if err != nil {
				return err
			}
			if apigw {
				return printAPIGatewayEvent(cmd.OutOrStdout(), req, base)
			}
			fmt.Fprintln(cmd.OutOrStdout(), req.Curl(base))
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "url", "http://127.0.0.1:3000", "receiver base URL")
	cmd.Flags().BoolVar(&apigw, "apigw", false, "print the API Gateway v2 event the receiver Lambda would get (for sam local invoke -e)")
	cmd.Flags().BoolVar(&replayable, "replayable", false, "print a sample that never expires (a sender that signs no timestamp) although the secrets are not dev/sources.json's fake ones")
	return cmd
}

// printAPIGatewayEvent writes the payload 2.0 event API Gateway would send
// the receiver for r, as `sam local invoke ReceiverFunction -e` takes it.
func printAPIGatewayEvent(w io.Writer, r sender.Request, base string) error {
	hr, err := http.NewRequest(http.MethodPost, r.URL(base), bytes.NewReader(r.Body))
	if err != nil {
		return err
	}
	hr.Header = r.Header.Clone()
	hr.SetPathValue("source", r.Source)
	ev, err := lambdalocal.NewEvent(hr, "POST /webhooks/{source}")
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
