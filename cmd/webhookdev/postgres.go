package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localpg"
)

// sharedMaxConnections is the throwaway server's max_connections: go test
// runs as many packages at once as CPUs, each with its tests' parallel
// pools, where a package's own cluster has 200 for itself.
const sharedMaxConnections = 400

// exitCode is a command's exit status to exit with, said by the command
// it ran (which has printed its own errors).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// ExitCode is the status to exit with (command.Run): the command said its
// own errors.
func (c exitCode) ExitCode() int { return int(c) }

func newPostgresCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "postgres -- CMD [ARGS...]",
		Short: "Run a command with DATABASE_URL naming a throwaway PostgreSQL server, then remove the server",
		Long: `postgres starts a throwaway cluster in memory (the machine's server binaries,
as the tests' own clusters), runs CMD with DATABASE_URL naming its database
postgres as the superuser, stops and removes the cluster, and exits with
CMD's status. Signals it gets are passed on to CMD.

The tests' packages (internal/testkit/pgtest) then share that one server
instead of each starting its own, each in databases of its own that it
drops: make test-short runs its tests so.`,
		Example: "  webhookdev postgres -- go test -short ./...",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := localpg.Start(cmd.Context(), localpg.Options{MaxConnections: sharedMaxConnections})
			if err != nil {
				return fmt.Errorf("start a throwaway PostgreSQL server: %w", err)
			}
			runErr := runWithDatabase(cmd, c.URL("postgres"), args)
			if err := c.Close(); err != nil {
				return errors.Join(runErr, fmt.Errorf("remove the throwaway PostgreSQL server: %w", err))
			}
			return runErr
		},
	}
}

// runWithDatabase runs args with DATABASE_URL set to dbURL, passing on
// the signals this process gets, and returns an exitCode when it fails.
func runWithDatabase(cmd *cobra.Command, dbURL string, args []string) error {
	child := exec.Command(args[0], args[1:]...)
	child.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	child.Stdin, child.Stdout, child.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	// Caught here, so that this process lives to remove the server after
	// CMD has ended: CMD decides what a signal means.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		return fmt.Errorf("run %s: %w", args[0], err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := child.Wait()
	close(done)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if code := exit.ExitCode(); code > 0 {
			return exitCode(code)
		}
		// Killed by a signal: the shell's status for it.
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitCode(128 + int(ws.Signal()))
		}
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", args[0], err)
	}
	return nil
}
