// Command webhookdev is the developer's tool: the whole system on this
// machine (`webhookdev dev`, what `make dev` runs), the real Lambda
// binaries under the Runtime Interface Emulator (`webhookdev local`, what
// `make local` runs), signed sample deliveries (`sample`, `send`),
// each deployment profile's monthly cost (`cost`, what `make cost` runs),
// and a throwaway PostgreSQL server for a command (`postgres`, what `make
// test-short` runs the tests under).
// Operators use webhookctl, which links none of this.
package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/command"
	"github.com/webhook-inbox/webhook-inbox/internal/devstack/readable"
)

func main() {
	// Lines from anywhere (a library's, through slog's default) are written
	// for the person at the terminal; `dev --emf` switches to the Lambdas'
	// JSON.
	slog.SetDefault(slog.New(readable.NewHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	command.Main(newRootCmd())
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "webhookdev",
		Short:         "Run webhook-inbox on this machine and send it signed deliveries",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCmd(), newLocalCmd(), newSampleCmd(), newSendCmd(), newCostCmd(), newSchemaCmd(), newNewCmd(), newPostgresCmd())
	return root
}
