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

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/lambdalocal"
	"github.com/webhook-inbox/webhook-inbox/internal/sender"
)

func newSampleCmd() *cobra.Command {
	var base string
	var apigw bool
	cmd := &cobra.Command{
		Use:   "sample SOURCE",
		Short: "Print a curl command that posts a freshly signed sample event to SOURCE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := devenv.LookupSource(cmd.Context(), os.Getenv, args[0])
			if err != nil {
				return err
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
