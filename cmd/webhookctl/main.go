// Command webhookctl is webhook-inbox's operator tool: what arrived, what
// is stuck and why (stats, events, dead letters), and the actions that fix
// it (requeue, replay, expunge, an archive run, migrations). It reads the
// functions' own settings. Developers run the local stack with webhookdev.
package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/command"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

func main() {
	// Log lines (a library's too, through slog's default) are JSON on
	// standard error, so a command's output stays its own; warn unless
	// LOG_LEVEL says otherwise.
	slog.SetDefault(settings.JSONLogger(os.Stderr, logLevel(os.Getenv)))
	command.Main(newRootCmd())
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "webhookctl",
		Short:         "Inspect and operate webhook-inbox",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command prints through the escaping writers (escape.go);
		// with no database settings, it uses the checkout's running make dev.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			useSafeOutput(cmd)
			if remoteAsked(cmd) {
				// Through an operator API: make dev's database settings
				// are not this command's.
				return nil
			}
			return useDevStack(cmd)
		},
		PersistentPostRun: func(cmd *cobra.Command, _ []string) { flushSafeOutput(cmd) },
	}
	registerRemote(root)
	root.AddCommand(newMigrateCmd(), newSourcesCmd(), newActionsCmd(), newWhoamiCmd(),
		newStatsCmd(), newEventsCmd(), newDeadLettersCmd(), newReplayCmd(), newExpungeCmd(), newArchiveCmd(), newConsoleCmd(),
		newHandlersCmd(handlers.Register))
	root.AddCommand(newQuarantineCmd())
	return root
}
