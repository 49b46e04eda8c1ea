package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/console"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
)

// defaultConsoleAddr is loopback only: the console acts with the
// operator's database rights.
const defaultConsoleAddr = "127.0.0.1:8089"

func newConsoleCmd() *cobra.Command {
	var (
		addr, token string
		hosts       []string
		readOnly    bool
		window      = console.DefaultWindow
		actor       actorFlags
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the operator console in the browser (127.0.0.1; a token protects it)",
		Long: `console serves a web console on --addr (127.0.0.1:8089): the overview
(received, accepted, refused by cause, processed, failed and dead-lettered
over --window as charts; backlog, open dead letters, archive progress), the
refusals (by source and cause, with what each means and what to do), the
events (filtered by source, type, state and time, found by id; each with
its body, from Postgres or the archive, and its attempt history), the dead
letters, and the operator actions. It requeues dead letters and replays
events after showing how many and asking to confirm, and expunges one
event's body once its id is typed again. It reads the database with this
command's settings (as 'events list' does; with none, the running make
dev's), and archived bodies, and expunges, with the archiver's
(ARCHIVE_BUCKET, ARCHIVE_PREFIX, S3_*).

It prints the address to open, with an access token (--token, else $` + console.EnvToken + `,
else a random one, at least 32 characters): every request without it is
refused, and an address that sends wrong tokens is slowed to one a second.
A request whose Host is not an IP address, localhost or a --host name is
refused (421). Actions are
recorded with --actor (else $` + EnvActor + `, else user@host) and --reason;
--read-only hides and refuses them. Stop it with Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			getenv := envOf(cmd)
			tok, _, err := console.TokenFromEnv(token, getenv)
			if err != nil {
				return err
			}
			access := operations.AccessAct
			if readOnly {
				access = operations.AccessRead
			}
			api, closeAPI, err := openAPIFor(cmd, access)
			if err != nil {
				return err
			}
			defer closeAPI()
			// Who the actions are recorded as: the name declared here (the
			// direct API records it), or what a remote API verifies.
			op := operations.Operator{Name: actor.name(getenv)}
			id, err := api.Whoami(operations.WithOperator(cmd.Context(), op))
			if err != nil {
				return fmt.Errorf("the operations API: %w", err)
			}
			srv, err := console.New(console.Config{API: api, Identity: id, Operator: op, Reason: strings.TrimSpace(actor.reason), Token: tok,
				Hosts: hosts, ReadOnly: readOnly, Window: window, Logger: settings.JSONLogger(cmd.ErrOrStderr(), logLevel(getenv))})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr: %w", err)
			}
			return serveConsole(cmd, ln, srv, tok, srv.SignInCode())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defaultConsoleAddr, "the address to listen on (keep it on loopback)")
	cmd.Flags().StringVar(&token, "token", "", "the access token (default $"+console.EnvToken+", else a random one)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "a name, besides IP addresses and localhost, the console may be opened by (a request naming any other Host is refused: DNS rebinding); repeatable")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "hide and refuse every action")
	cmd.Flags().TextVar(&window, "window", console.DefaultWindow, "the window of the overview's charts and of the refusals page (a span: 1h, 1d, 7d)")
	actor.register(cmd)
	return cmd
}

// serveConsole prints the address to open and serves until the command's
// context ends (Ctrl-C), then shuts down.
func serveConsole(cmd *cobra.Command, ln net.Listener, h http.Handler, token, code string) error {
	ctx := cmd.Context()
	if ip, ok := ln.Addr().(*net.TCPAddr); ok && !ip.IP.IsLoopback() {
		fmt.Fprintf(cmd.ErrOrStderr(), "webhookctl console: warning: listening on %s, not on loopback: anyone who can reach it and has the token acts with your database rights\n", ln.Addr())
	}
	// The printed address signs in once: the one a browser keeps in its
	// history is spent. The token's address signs in any browser, at any
	// time, and stays in the history of the browsers that open it.
	fmt.Fprintf(cmd.OutOrStdout(), "webhook-inbox console: open http://%s/?code=%s\n(it signs one browser in, within %s; another browser: http://%s/?token=%s)\n(Ctrl-C stops it)\n",
		ln.Addr(), code, console.SignInCodeTTL, ln.Addr(), token)
	flushSafeOutput(cmd)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
