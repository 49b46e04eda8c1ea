// Command webhookctl is webhook-inbox's operator and developer tool: the
// local dev stack (`webhookctl dev`, what `make dev` runs), migrations and
// sample deliveries.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "webhookctl:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "webhookctl",
		Short:         "Run, inspect and operate webhook-inbox",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCmd(), newMigrateCmd(), newSampleCmd(), newSourcesCmd(), newSendCmd(),
		newStatsCmd(), newEventsCmd(), newDeadLettersCmd(), newReplayCmd(), newExpungeCmd(), newArchiveCmd())
	root.AddCommand(newLocalCmd())
	return root
}
