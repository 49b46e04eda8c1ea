package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/webhook-inbox/webhook-inbox/internal/devenv"
	"github.com/webhook-inbox/webhook-inbox/shared/archive"
	"github.com/webhook-inbox/webhook-inbox/shared/blobstore"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/secrets"
	"github.com/webhook-inbox/webhook-inbox/shared/settings"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// The operator commands (stats, events, dead-letters, replay, expunge,
// archive) read the functions' own configuration: DATABASE_URL (or
// DATABASE_SECRET_ARN, DATABASE_HOST/PORT/NAME, DATABASE_IAM_AUTH with
// DATABASE_USER, DATABASE_QUERY_MODE, DATABASE_SSLMODE, resolved by secrets.Environment
// exactly as a Lambda resolves them at init) and, for
// what touches the archive, the archiver's ARCHIVE_* and S3_* settings.
// Without database settings they use the running make dev's (devstack.go).

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

// ops is what an operator command works with.
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
// the pool every operator command uses: the database's settings as the
// functions read them (storage.PoolConfigFromEnv), under the CLI's name.
func openOps(cmd *cobra.Command) (*ops, error) {
	ctx := cmd.Context()
	getenv, creds, err := secrets.Environment(ctx, envOf(cmd))
	if err != nil {
		return nil, err
	}
	db, err := storage.PoolConfigFromEnv(getenv)
	if err != nil {
		if db.URL == "" {
			err = fmt.Errorf("%w, and no make dev is running in this checkout (%s)", err, devenv.StackFile)
		}
		return nil, err
	}
	db.ApplicationName, db.Credentials = operatorApplicationName, creds
	pool, err := db.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &ops{cmd: cmd, getenv: getenv, store: storage.New(pool), close: pool.Close}, nil
}

// logger is where the archiver's own log lines go: standard error, at
// LOG_LEVEL or warn by default, so that a command's output stays its own.
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

// archiveConfig reads the archiver's configuration (the bucket, the S3
// endpoint and keys, the prefix, the minimum age) as the archiver function
// reads it.
func (o *ops) archiveConfig() (archive.Config, error) {
	cfg, err := archive.ConfigFromEnv(o.getenv)
	if err != nil {
		return cfg, fmt.Errorf("the archive's settings (as the archiver function's: %s, and %s, %s, %s for a local S3): %w",
			blobstore.EnvBucket, blobstore.EnvEndpoint, blobstore.EnvAccessKeyID, blobstore.EnvSecretAccessKey, err)
	}
	return cfg, nil
}

// archiver builds the archiver from cfg (archiveConfig, which a command
// may have adjusted) on the command's database, as the archiver function
// builds it, logging to standard error.
func (o *ops) archiver(cfg archive.Config) (*archive.Archiver, error) {
	blobs, err := blobstore.Open(o.cmd.Context(), cfg.S3)
	if err != nil {
		return nil, err
	}
	cfg.Store, cfg.Blobs, cfg.Logger = o.store, blobs, o.logger()
	return archive.New(cfg)
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

// timeFlags are a time window: --since (a duration before now) or --from
// and --to (RFC 3339 times or dates).
type timeFlags struct {
	since    time.Duration
	from, to string
}

func (t *timeFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().DurationVar(&t.since, "since", 0, what+" in the last DURATION (e.g. 2h)")
	cmd.Flags().StringVar(&t.from, "from", "", what+" at or after this time (RFC 3339, or a date: 2026-12-01)")
	cmd.Flags().StringVar(&t.to, "to", "", what+" before this time (RFC 3339, or a date)")
}

// window returns the bounds at now; zero times are open ends.
func (t *timeFlags) window(now time.Time) (from, to time.Time, err error) {
	if t.since < 0 {
		return from, to, errors.New("--since must be positive")
	}
	if t.since > 0 && t.from != "" {
		return from, to, errors.New("give --since or --from, not both")
	}
	if t.since > 0 {
		from = now.Add(-t.since)
	}
	if from.IsZero() && t.from != "" {
		if from, err = parseTime(t.from); err != nil {
			return from, to, fmt.Errorf("--from: %w", err)
		}
	}
	if t.to != "" {
		if to, err = parseTime(t.to); err != nil {
			return from, to, fmt.Errorf("--to: %w", err)
		}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return from, to, errors.New("the window is empty: --from must be before --to")
	}
	return from, to, nil
}

// parseTime reads RFC 3339 (with or without fractions) or a UTC date.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T02:00:00Z) nor a date (2026-12-01)", s)
}

// eventRef is an event named on the command line: its primary key, or
// its source and event id.
type eventRef struct {
	id      int64
	source  string
	eventID string
}

// parseEventRef reads ID or SOURCE EVENT_ID.
func parseEventRef(args []string) (eventRef, error) {
	switch len(args) {
	case 1:
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return eventRef{}, fmt.Errorf("%q is not an event's id (the number `events list` shows); name an event by SOURCE EVENT_ID otherwise", args[0])
		}
		return eventRef{id: id}, nil
	case 2:
		return eventRef{source: args[0], eventID: args[1]}, nil
	}
	return eventRef{}, errors.New("name one event: ID, or SOURCE EVENT_ID")
}

// get reads the event.
func (r eventRef) get(ctx context.Context, store *storage.Store) (*inbox.Event, error) {
	var e *inbox.Event
	var err error
	if r.id != 0 {
		e, err = store.EventGetByID(ctx, r.id)
	} else {
		e, err = store.EventGetByKey(ctx, r.source, r.eventID)
	}
	if errors.Is(err, storage.ErrEventNotFound) {
		return e, fmt.Errorf("no such event (%s)", r)
	}
	return e, err
}

func (r eventRef) String() string {
	if r.id != 0 {
		return "id " + strconv.FormatInt(r.id, 10)
	}
	return r.source + "/" + r.eventID
}

// Helpers for human tables.

// ago renders how long before now t was, coarsely ("3m12s", "2h5m").
func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + roundDuration(-d).String()
	}
	return roundDuration(d).String() + " ago"
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(100 * time.Millisecond)
	}
}

// span renders a setting's duration, in days when it is whole days
// ("7d", as ARCHIVE_MIN_AGE is written).
func span(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// stamp renders a time for a table, in UTC to the second.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// orNull is s for JSON output, where "" is null.
// orDash is s, or "-" for an empty s, for a table cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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

// bytesHuman renders a size in binary units.
func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// confirmDestructive refuses an irreversible change without --yes.
func confirmDestructive(yes bool, what string) error {
	if yes {
		return nil
	}
	return fmt.Errorf("%s: run it with --dry-run to see what it would change, then with --yes to do it", what)
}
