package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/sender"
)

func newSampleCmd() *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "sample SOURCE",
		Short: "Print a curl command that posts a freshly signed sample event to SOURCE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, _, err := devSources()
			if err != nil {
				return err
			}
			src, ok := sources.Lookup(args[0])
			if !ok {
				return fmt.Errorf("no source named %q (configured: %v)", args[0], sources.Names())
			}
			req, err := sender.Sample(src, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), req.Curl(base))
			return nil
		},
	}
	cmd.Flags().StringVar(&base, "url", "http://127.0.0.1:3000", "receiver base URL")
	return cmd
}
