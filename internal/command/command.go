// Package command runs a command-line tool's root command the way both of
// the project's tools (webhookctl, webhookdev) do: Ctrl-C or SIGTERM
// cancels the command's context, so that what it started stops cleanly,
// and an error follows the tool's name with its control characters but
// line breaks and tabs escaped (an error can quote what a request or the
// database holds, which must not reach a terminal raw), with exit status 1;
// an error with an ExitCode method exits with that status, unsaid.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
)

// Main runs root and exits with its status.
func Main(root *cobra.Command) {
	os.Exit(Run(root, os.Stderr))
}

// Run runs root until it returns or a signal cancels it, writes its error
// to stderr, and returns the exit status.
func Run(root *cobra.Command, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		// A command another program ran (webhookdev postgres -- CMD)
		// passes on its status; that program said its own errors.
		var status interface{ ExitCode() int }
		if errors.As(err, &status) {
			return status.ExitCode()
		}
		fmt.Fprintln(stderr, root.Name()+":", inbox.EscapeControls(err.Error(), "\n\t"))
		return 1
	}
	return 0
}
