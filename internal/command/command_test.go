package command_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/command"
)

func TestRunEscapesTheErrorAndSaysTheStatus(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	root := &cobra.Command{Use: "tool", SilenceUsage: true, SilenceErrors: true, RunE: func(cmd *cobra.Command, _ []string) error {
		ctx = cmd.Context()
		return errors.New("refused \x1b[31mred\x1b[0m\nsecond line")
	}}
	root.SetArgs(nil)
	var stderr bytes.Buffer
	if code := command.Run(root, &stderr); code != 1 {
		t.Errorf("status = %d, want 1", code)
	}
	// Escape sequences are escaped; line breaks stay (an error may list
	// several problems, a line each).
	if got, want := stderr.String(), "tool: refused \\u001b[31mred\\u001b[0m\nsecond line\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if ctx == nil || ctx.Done() == nil {
		t.Error("the command ran without a cancellable context")
	}

	ok := &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return nil }}
	ok.SetArgs(nil)
	stderr.Reset()
	if code := command.Run(ok, &stderr); code != 0 || stderr.Len() != 0 {
		t.Errorf("success: status %d, stderr %q", code, stderr.String())
	}

	// A command whose own program failed: its status, and nothing said.
	passOn := &cobra.Command{Use: "tool", SilenceUsage: true, SilenceErrors: true, RunE: func(*cobra.Command, []string) error { return status(7) }}
	passOn.SetArgs(nil)
	stderr.Reset()
	if code := command.Run(passOn, &stderr); code != 7 || stderr.Len() != 0 {
		t.Errorf("a status passed on: %d, stderr %q; want 7 and nothing", code, stderr.String())
	}
}

type status int

func (s status) Error() string { return "exit status" }
func (s status) ExitCode() int { return int(s) }
