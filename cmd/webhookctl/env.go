package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The operator commands read the functions' own configuration:
// DATABASE_URL (or DATABASE_SECRET_ARN, DATABASE_HOST/PORT/NAME,
// DATABASE_IAM_AUTH with DATABASE_USER, DATABASE_QUERY_MODE,
// DATABASE_SSLMODE, resolved by secrets.Environment exactly as a Lambda
// resolves them at init) and, for what touches the archive, the
// archiver's ARCHIVE_* and S3_* settings. Without database settings they
// use the running make dev's (devstack.go). Every operator read and action
// goes through operations.API (api.go); openOps is the database alone, for
// what is no operator read (migrate).

// envKey carries a getenv in a command's context: tests give each command
// its own environment, so that they can run in parallel.
type envKey struct{}

// withEnv returns ctx whose commands read their settings from getenv.
func withEnv(ctx context.Context, getenv func(string) string) context.Context {
	return context.WithValue(ctx, envKey{}, getenv)
}

// envOf returns the getenv of cmd's context, else os.Getenv.
func envOf(cmd *cobra.Command) func(string) string {
	if g, ok := cmd.Context().Value(envKey{}).(func(string) string); ok {
		return g
	}
	return os.Getenv
}

// ops is the database a command opened, with its settings.
type ops struct {
	cmd    *cobra.Command
	getenv func(string) string // secrets resolved
	store  *storage.Store
	close  func()
}

// operatorApplicationName names the CLI's connections in
// pg_stat_activity, apart from the functions'.
const operatorApplicationName = "webhookctl"

// openOps resolves the environment's secrets and opens the database with
// the pool every command uses: the database's settings as the functions
// read them (storage.PoolConfigFromEnv), under the CLI's name.
func openOps(cmd *cobra.Command) (*ops, error) { return openOpsSession(cmd, false) }

// openOpsSession is openOps; readOnly opens every connection with
// default_transaction_read_only=on, so that nothing done through the pool
// writes, whatever the code above it does (a read-only console's, or any
// command's that may only read): a write fails in Postgres with SQLSTATE
// 25006 (read_only_sql_transaction).
func openOpsSession(cmd *cobra.Command, readOnly bool) (*ops, error) {
	ctx := cmd.Context()
	getenv, creds, err := secrets.Environment(ctx, envOf(cmd))
	if err != nil {
		return nil, err
	}
	db, err := storage.PoolConfigFromEnv(getenv)
	if err != nil {
		if db.URL == "" {
			err = fmt.Errorf("%w, and no make dev is running in this checkout (%s)", err, checkout.StackFile)
		}
		return nil, err
	}
	db.ApplicationName, db.Credentials = operatorApplicationName, creds
	if readOnly {
		db.RuntimeParams = maps.Clone(db.RuntimeParams)
		if db.RuntimeParams == nil {
			db.RuntimeParams = map[string]string{}
		}
		db.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := db.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &ops{cmd: cmd, getenv: getenv, store: storage.New(pool), close: pool.Close}, nil
}

// logger is where the operations' and the archiver's own log lines go:
// standard error, at LOG_LEVEL or warn by default, so that a command's
// output stays its own.
func (o *ops) logger() *slog.Logger {
	return settings.JSONLogger(o.cmd.ErrOrStderr(), logLevel(o.getenv))
}

// logLevel is LOG_LEVEL, warn when unset or bad: an operator's command
// shows what went wrong, not the archiver's progress.
func logLevel(getenv func(string) string) slog.Level {
	if getenv(settings.EnvLogLevel) == "" {
		return slog.LevelWarn
	}
	if l, err := settings.LogLevel(getenv); err == nil {
		return l
	}
	return slog.LevelWarn
}

// writeJSON prints v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// newTable returns the writer of a human table; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := raw(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// bar is a progress bar on standard error, drawn only when standard error
// is a terminal: scripts, pipes, tests and --json output stay clean. A nil
// *bar does nothing.
type bar struct{ pb *progressbar.ProgressBar }

// newBar starts a bar of total steps (-1 for a spinner of unknown length).
func newBar(cmd *cobra.Command, total int64, what string) *bar {
	w := raw(cmd.ErrOrStderr()) // the bar's own control sequences
	if !isTerminal(w) {
		return nil
	}
	return &bar{pb: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

// Set moves the bar to n.
func (b *bar) Set(n int) {
	if b != nil {
		_ = b.pb.Set(n)
	}
}

// Add moves the bar by n.
func (b *bar) Add(n int) {
	if b != nil {
		_ = b.pb.Add(n)
	}
}

// Done ends the bar.
func (b *bar) Done() {
	if b != nil {
		_ = b.pb.Finish()
	}
}

// timeFlags are a time window as typed: --since (a span before now:
// "2h", "1d") or --from and --to (RFC 3339 times or dates), read by
// operations.ParseWindow, so every front end reads a window alike.
type timeFlags struct {
	since, from, to string
}

func (t *timeFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&t.since, "since", "", what+" in the last SPAN (e.g. 2h, 1d)")
	cmd.Flags().StringVar(&t.from, "from", "", what+" at or after this time (RFC 3339, or a date: 2026-12-01)")
	cmd.Flags().StringVar(&t.to, "to", "", what+" before this time (RFC 3339, or a date)")
}

// window is the flags' window; the API reads its ends on the database's
// clock.
func (t *timeFlags) window() (operations.Window, error) {
	return operations.ParseWindow(t.since, t.from, t.to)
}

// idArg reads the id a command may take as its argument into id, where
// --id may have put it already: what is a row's kind ("dead letter"), for
// the refusal of an argument that is no id.
func idArg(args []string, id *int64, what string) error {
	if len(args) == 0 {
		return nil
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not %s's id", args[0], what)
	}
	if *id != 0 && *id != n {
		return errors.New("give the id once")
	}
	*id = n
	return nil
}

// parseEventRef reads ID or SOURCE EVENT_ID.
func parseEventRef(args []string) (operations.EventRef, error) {
	switch len(args) {
	case 1:
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return operations.EventRef{}, fmt.Errorf("%q is not an event's id (the number `events list` shows); name an event by SOURCE EVENT_ID otherwise", args[0])
		}
		return operations.EventRef{ID: id}, nil
	case 2:
		return operations.EventRef{Source: args[0], EventID: args[1]}, nil
	}
	return operations.EventRef{}, errors.New("name one event: ID, or SOURCE EVENT_ID")
}

// Helpers for human tables; times, spans and sizes are written by
// operations (Ago, Stamp, Span.String, Bytes), as every front end writes
// them.

// orDash is s, or "-" for an empty s, for a table cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deref is *s, or "" for none (the API's nullable texts).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// oneLine shortens s to one line of at most n runes, for a table cell,
// with control characters escaped.
func oneLine(s string, n int) string {
	s = safeText(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// safeText escapes the control characters of s, but newlines and tabs,
// as the output writers do (escape.go): bodies and error texts come from
// senders and handlers, and an escape sequence printed as is would drive
// the operator's terminal.
func safeText(s string) string {
	return inbox.EscapeControls(s, "\n\t")
}

// confirmDestructive refuses an irreversible change without --yes.
func confirmDestructive(yes bool, what string) error {
	if yes {
		return nil
	}
	return fmt.Errorf("%s: run it with --dry-run to see what it would change, then with --yes to do it", what)
}
