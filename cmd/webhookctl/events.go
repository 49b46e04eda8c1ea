package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

// maxListLimit is the most a list command prints at once (--limit); the
// API answers pages of at most operations.MaxLimit, so a longer list is
// several calls.
const maxListLimit = 10000

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "List events, or show one in full with its attempts, errors and raw body; discard unprocessed ones"}
	cmd.AddCommand(newEventsListCmd(), newEventsShowCmd(), newEventsDiscardCmd())
	return cmd
}

func newEventsListCmd() *cobra.Command {
	var (
		source, typ, state string
		match, header      string
		window             timeFlags
		l                  listFlags
		before             int64
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first, by source, type, state and time received",
		Long: fmt.Sprintf(`list prints the events matching the filters, newest first, at most --limit;
--before ID pages on (the JSON's next_before).

States: %v. The backlog is pending + retrying + paused + in_flight
(paused: held by the pause of its source or handler, 'webhookctl sources
resume' or 'handlers resume' lets it run);
processed and archived events are done (archived: body in S3; unhandled:
processed without a handler); dead events are in the dead letters (see
dead-letters list).

Search by content: --match '{"customer":"cus_123"}' keeps the events whose
stored payload contains that JSON (an object or array; nested objects,
array elements, numbers and strings compare as JSON, exactly), and
--header NAME=VALUE those whose kind kept that header (only a few headers
are kept: an unknown one is refused with the list). A search walks the
receipt window (--since/--from/--to; without a start, the last %s)
newest first, a bounded number of events per request, and says how far
down it searched; archived, expired and expunged events keep no payload
here and are not matched (docs/operations.md, "Search by content").`, operations.EventStates(), operations.DefaultSearchWindow),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			w, err := window.window()
			if err != nil {
				return err
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			page, err := listEvents(cmd, api, operations.EventQuery{Source: source, Type: typ, State: state, Window: w, Before: before,
				Match: match, Header: header}, l.limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if l.asJSON {
				return writeJSON(out, page)
			}
			if len(page.Events) == 0 {
				fmt.Fprintln(out, "no events match")
				printSearch(out, page)
				return nil
			}
			now := page.At
			tw := newTable(out)
			fmt.Fprintln(tw, "ID\tSOURCE\tEVENT ID\tTYPE\tSTATE\tATTEMPTS\tRECEIVED\tNOTE")
			for _, e := range page.Events {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, e.Source, oneLine(e.EventID, 40), oneLine(e.Type, 40),
					e.State, e.Attempts, operations.Ago(now, e.ReceivedAt), eventNote(now, e))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printSearch(out, page)
			if page.NextBefore != nil {
				fmt.Fprintf(out, "(more: --before %d)\n", *page.NextBefore)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "only this source")
	cmd.Flags().StringVar(&typ, "type", "", "only this event type")
	cmd.Flags().StringVar(&state, "state", "", fmt.Sprintf("only this state: %v", operations.EventStates()))
	window.register(cmd, "received")
	l.register(cmd, 50)
	cmd.Flags().Int64Var(&before, "before", 0, "only events with a smaller id (paging)")
	cmd.Flags().StringVar(&match, "match", "", `only events whose payload contains this JSON, such as '{"customer":"cus_123"}'`)
	cmd.Flags().StringVar(&header, "header", "", "only events whose kind kept this header with this value: NAME=VALUE")
	return cmd
}

// printSearch says how far a search by content got.
func printSearch(out io.Writer, page *operations.EventPage) {
	sr := page.Search
	if sr == nil {
		return
	}
	to := "now"
	if !sr.To.IsZero() {
		to = operations.Stamp(&sr.To)
	}
	if sr.Complete {
		fmt.Fprintf(out, "searched %d events, the whole window received %s to %s\n", sr.Scanned, operations.Stamp(&sr.From), to)
		return
	}
	fmt.Fprintf(out, "searched %d events received %s to %s, down to %s; the older ones are not searched yet\n",
		sr.Scanned, operations.Stamp(&sr.From), to, operations.Stamp(&sr.DownTo))
}

// listEvents reads up to limit events of q, page after page, as one page:
// the time of its first read, and the cursor after its last event. A
// search by content's page may hold few events or none and still go on
// (each request reads a bounded number of events): it is followed to the
// limit or the window's end, and the page says how far it got over all
// its requests.
func listEvents(cmd *cobra.Command, api operations.API, q operations.EventQuery, limit int) (*operations.EventPage, error) {
	all := &operations.EventPage{}
	if q.Match != "" || q.Header != "" {
		all.Events = []operations.Event{}
		for {
			q.Limit = min(limit-len(all.Events), operations.MaxLimit)
			p, err := api.Events(cmd.Context(), q)
			if err != nil {
				return nil, err
			}
			if all.At.IsZero() {
				all.At = p.At
			}
			scanned := 0
			if all.Search != nil {
				scanned = all.Search.Scanned
			}
			all.Search = p.Search
			if all.Search != nil {
				all.Search.Scanned += scanned
			}
			all.Events, all.NextBefore = append(all.Events, p.Events...), p.NextBefore
			if p.NextBefore == nil || len(all.Events) >= limit {
				return all, nil
			}
			q.Before = *p.NextBefore
		}
	}
	var err error
	all.Events, all.NextBefore, all.At, err = readPages(limit, q.Before, func(n int, before int64) (*operations.EventPage, error) {
		q.Limit, q.Before = n, before
		return api.Events(cmd.Context(), q)
	}, func(p *operations.EventPage) ([]operations.Event, *int64, time.Time) {
		return p.Events, p.NextBefore, p.At
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// readPages reads up to limit items of a list the API answers a page at
// a time (at most operations.MaxLimit): page reads a page of at most n
// items from cursor (start, then each page's next cursor), and items
// gives its items, the cursor of the next page (nil on the last) and the
// page's time. It returns the items, the cursor after the last one (nil
// when the list is done), and the first page's time: the list's.
func readPages[P, T any](limit int, start int64, page func(n int, cursor int64) (*P, error), items func(*P) ([]T, *int64, time.Time)) ([]T, *int64, time.Time, error) {
	out := []T{}
	cursor := start
	var at time.Time
	for {
		p, err := page(min(limit-len(out), operations.MaxLimit), cursor)
		if err != nil {
			return nil, nil, at, err
		}
		got, next, pageAt := items(p)
		if at.IsZero() {
			at = pageAt
		}
		out = append(out, got...)
		if next == nil || len(got) == 0 || len(out) >= limit {
			return out, next, at, nil
		}
		cursor = *next
	}
}

// listFlags are the flags of a list read up to --limit: --limit and
// --json.
type listFlags struct {
	limit  int
	asJSON bool
}

// register adds the flags, --limit defaulting to limit.
func (l *listFlags) register(cmd *cobra.Command, limit int) {
	cmd.Flags().IntVar(&l.limit, "limit", limit, fmt.Sprintf("at most this many (up to %d)", maxListLimit))
	cmd.Flags().BoolVar(&l.asJSON, "json", false, "print JSON")
}

// check refuses a --limit out of range.
func (l *listFlags) check() error {
	if l.limit <= 0 || l.limit > maxListLimit {
		return fmt.Errorf("--limit must be 1 to %d", maxListLimit)
	}
	return nil
}

// printList prints a list read up to --limit: page whole with --json;
// otherwise a table of its items under header (a row each), none alone
// when it is empty, and a note when the limit cut it (more).
func printList[T any](cmd *cobra.Command, l listFlags, page any, items []T, more bool, none, header string, row func(tw io.Writer, item T)) error {
	out := cmd.OutOrStdout()
	if l.asJSON {
		return writeJSON(out, page)
	}
	if len(items) == 0 {
		fmt.Fprintln(out, none)
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		row(tw, it)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(out, "(first %d shown: narrow the filters or raise --limit)\n", len(items))
	}
	return nil
}

// eventNote is the list's last column: what is next, or how it ended.
func eventNote(now time.Time, e operations.Event) string {
	switch e.State {
	case inbox.StateProcessed, inbox.StateArchived:
		if e.ProcessedAt == nil {
			return deref(e.Outcome)
		}
		return fmt.Sprintf("%s %s", deref(e.Outcome), operations.Ago(now, *e.ProcessedAt))
	case inbox.StateDead:
		if e.DeadAt == nil {
			return "dead: " + oneLine(deref(e.LastError), 60)
		}
		return "dead " + operations.Ago(now, *e.DeadAt) + ": " + oneLine(deref(e.LastError), 60)
	case inbox.StateExpunged:
		return "body erased"
	case inbox.StatePaused:
		return pausedNote(now, e)
	}
	if e.NextAttemptAt == nil {
		return ""
	}
	switch e.State {
	case inbox.StateInFlight:
		return "lease ends " + operations.Ago(now, *e.NextAttemptAt)
	case inbox.StateRetrying:
		return "next attempt " + operations.Ago(now, *e.NextAttemptAt) + ": " + oneLine(deref(e.LastError), 60)
	default:
		return "due " + operations.Ago(now, *e.NextAttemptAt)
	}
}

// eventView is `events show --json`: the event's fields at the top level
// (as the command always printed them, for scripts), its detail's lists,
// and its body.
type eventView struct {
	operations.Event
	History        []operations.Attempt    `json:"history"`
	Actions        []operations.Action     `json:"actions"`
	DeadLetters    []operations.DeadLetter `json:"dead_letters"`
	OpenDeadLetter int64                   `json:"open_dead_letter"`
	Mismatches     []operations.Mismatch   `json:"payload_mismatches"`
	// The raw body: Body when it is UTF-8 text, else BodyBase64; BodyFrom
	// says where it was read ("postgres" or "archive"), BodyError why not.
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
	BodyFrom   string  `json:"body_from,omitempty"`
	BodyError  string  `json:"body_error,omitempty"`
}

func newEventsShowCmd() *cobra.Command {
	var (
		asJSON, noBody bool
		bodyOut        string
	)
	cmd := &cobra.Command{
		Use:   "show ID | SOURCE EVENT_ID",
		Short: "Show one event: metadata, state, attempts and errors, dead letters, and its raw body from Postgres or the S3 archive",
		Long: `show prints everything about one event, named by its id (the first column
of events list) or by its source and the sender's event id: its state and
times, the error history of its attempts, its dead letters, redeliveries
whose body differed, and its raw body, byte for byte as the sender signed it.

The body is read from Postgres while it is there, else from its archive
object in S3 with the archiver's settings (ARCHIVE_BUCKET, ARCHIVE_PREFIX,
and S3_ENDPOINT, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY for a local S3),
and checked against the SHA-256 recorded at receipt. --body-out FILE
writes the raw bytes to FILE (- for standard output, alone), e.g. to resend
them with 'webhookdev send'.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseEventRef(args)
			if err != nil {
				return err
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			ctx := cmd.Context()
			d, err := api.Event(ctx, ref)
			if err != nil {
				return err
			}
			var body *operations.Body
			var bodyErr error
			if !noBody || bodyOut != "" {
				body, bodyErr = api.EventBody(ctx, d.Event.ID)
			}
			// An expunged body, or one past the body retention, is gone on
			// purpose: shown as such, no failure.
			expunged := inbox.CauseOf(bodyErr) == inbox.CauseEventExpunged || inbox.CauseOf(bodyErr) == inbox.CauseBodyExpired

			if bodyOut != "" {
				if bodyErr != nil {
					return bodyErr
				}
				if err := writeBody(cmd, bodyOut, body.Bytes); err != nil || bodyOut == "-" {
					return err // standard output holds the body alone
				}
			}

			out := cmd.OutOrStdout()
			if asJSON {
				v := eventView{Event: d.Event, History: d.History, Actions: d.Actions, DeadLetters: d.DeadLetters,
					OpenDeadLetter: d.OpenDeadLetter, Mismatches: d.Mismatches}
				switch {
				case bodyErr != nil:
					v.BodyError = bodyErr.Error()
				case body != nil && !noBody && utf8.Valid(body.Bytes):
					s := string(body.Bytes)
					v.Body, v.BodyFrom = &s, body.From
				case body != nil && !noBody:
					v.BodyBase64, v.BodyFrom = body.Bytes, body.From
				}
				if err := writeJSON(out, v); err != nil {
					return err
				}
			} else {
				if err := printEvent(out, d); err != nil {
					return err
				}
				if !noBody {
					printBody(out, body, bodyErr)
				}
			}
			if bodyErr != nil && !expunged {
				return fmt.Errorf("the body of event %d could not be read: %w", d.Event.ID, bodyErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the body as text, or body_base64 when it is not UTF-8)")
	cmd.Flags().BoolVar(&noBody, "no-body", false, "do not read or print the body")
	cmd.Flags().StringVar(&bodyOut, "body-out", "", "write the raw body to this file (- for standard output alone)")
	return cmd
}

// writeBody writes the raw bytes to path, or to standard output for "-":
// the one output that is not escaped, on purpose (for a pipe or a file),
// so never to a terminal.
func writeBody(cmd *cobra.Command, path string, body []byte) error {
	if path != "-" {
		return os.WriteFile(path, body, 0o600)
	}
	out := raw(cmd.OutOrStdout())
	if isTerminal(out) {
		return errors.New("--body-out - writes the raw body, control characters included: redirect it to a file or a pipe")
	}
	_, err := out.Write(body)
	return err
}

func printEvent(out io.Writer, d *operations.EventDetail) error {
	now, e := d.At, d.Event
	tw := newTable(out)
	kind := ""
	if e.SourceKind != "" {
		kind = " (kind " + e.SourceKind + ")"
	}
	fmt.Fprintf(tw, "EVENT %d\t%s/%s%s\n", e.ID, e.Source, e.EventID, kind)
	fmt.Fprintf(tw, "  type\t%s\n", e.Type)
	fmt.Fprintf(tw, "  state\t%s\n", e.State)
	fmt.Fprintf(tw, "  received\t%s (%s)\n", operations.Stamp(&e.ReceivedAt), operations.Ago(now, e.ReceivedAt))
	if e.ProcessedAt != nil {
		fmt.Fprintf(tw, "  processed\t%s (%s), outcome %s\n", operations.Stamp(e.ProcessedAt), operations.Ago(now, *e.ProcessedAt), deref(e.Outcome))
	} else if e.NextAttemptAt != nil && e.State != inbox.StateInFlight {
		fmt.Fprintf(tw, "  next attempt\t%s (%s)\n", operations.Stamp(e.NextAttemptAt), operations.Ago(now, *e.NextAttemptAt))
	} else if e.HeldBy != nil {
		fmt.Fprintf(tw, "  held\t%s\n", pausedNote(now, e))
	}
	solo := ""
	if e.Solo {
		solo = "; runs alone"
	}
	fmt.Fprintf(tw, "  attempts\t%d, %d failed in this run%s\n", e.Attempts, e.FailedAttempts, solo)
	if e.ClaimedUntil != nil {
		fmt.Fprintf(tw, "  claimed\tuntil %s (%s), by %s\n", operations.Stamp(e.ClaimedUntil), operations.Ago(now, *e.ClaimedUntil), oneLine(deref(e.ClaimedBy), 120))
	}
	if e.LastError != nil {
		fmt.Fprintf(tw, "  last error\t%s\n", oneLine(*e.LastError, 200))
	}
	if e.DeadAt != nil {
		fmt.Fprintf(tw, "  dead\t%s (%s): in the dead letters\n", operations.Stamp(e.DeadAt), operations.Ago(now, *e.DeadAt))
	}
	if e.ArchiveKey != nil {
		var off, n int64
		if e.ArchiveOffset != nil && e.ArchiveLength != nil {
			off, n = *e.ArchiveOffset, *e.ArchiveLength
		}
		fmt.Fprintf(tw, "  archived\t%s in %s [%d, +%d)\n", operations.Stamp(e.ArchivedAt), *e.ArchiveKey, off, n)
	}
	if e.ExpungedAt != nil {
		fmt.Fprintf(tw, "  expunged\t%s\n", operations.Stamp(e.ExpungedAt))
	}
	if e.BodyExpiredAt != nil {
		fmt.Fprintf(tw, "  body expired\t%s: removed past the body retention; the row, id and hash stay\n", operations.Stamp(e.BodyExpiredAt))
	}
	fmt.Fprintf(tw, "  body\t%d bytes, sha256 %s\n", e.BodySize, e.BodySHA256)
	for _, k := range e.MetadataKeys() {
		fmt.Fprintf(tw, "  metadata\t%s = %s\n", oneLine(k, 80), oneLine(e.Metadata[k], 200))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(d.History) > 0 {
		fmt.Fprintf(out, "\nHISTORY\n")
		tw = newTable(out)
		fmt.Fprintln(tw, "  #\tSTARTED\tTOOK\tOUTCOME\tCAUSE\tBATCH\tPROCESSOR\tERROR")
		for _, a := range d.History {
			took, outcome := "-", a.Outcome
			if a.FinishedAt != nil {
				took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
			}
			if a.Dead {
				outcome += ", dead"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.Attempt, operations.Stamp(&a.StartedAt), took, outcome,
				orDash(deref(a.Cause)), a.BatchSize, orDash(oneLine(deref(a.Processor), 60)), oneLine(deref(a.Error), 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(d.Actions) > 0 {
		fmt.Fprintf(out, "\nOPERATOR ACTIONS\n")
		if err := printActions(out, d.Actions); err != nil {
			return err
		}
	}
	if len(d.DeadLetters) > 0 {
		fmt.Fprintf(out, "\nDEAD LETTERS\n")
		tw = newTable(out)
		fmt.Fprintln(tw, "  ID\tDEAD AT\tREQUEUED AT\tATTEMPTS\tLAST ERROR")
		for _, dl := range d.DeadLetters {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", dl.ID, operations.Stamp(&dl.DeadAt), operations.Stamp(dl.RequeuedAt), dl.Attempts, oneLine(deref(dl.LastError), 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var changed, replays []operations.Mismatch
	for _, m := range d.Mismatches {
		if m.Cause == inbox.CauseSuspectedReplay {
			replays = append(replays, m)
		} else {
			changed = append(changed, m)
		}
	}
	if len(changed) > 0 {
		fmt.Fprintf(out, "\nREDELIVERIES WITH A DIFFERENT BODY (the first body was kept)\n")
		tw = newTable(out)
		fmt.Fprintln(tw, "  RECEIVED\tSIZE\tSHA256")
		for _, m := range changed {
			fmt.Fprintf(tw, "  %s\t%d\t%s\n", operations.Stamp(&m.ReceivedAt), m.ReceivedSize, m.ReceivedSHA256)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(replays) > 0 {
		fmt.Fprintf(out, "\nSUSPECTED REPLAYS (this body under another id: not stored, not processed; at most %d are recorded)\n", storage.PayloadMismatchCap)
		tw = newTable(out)
		fmt.Fprintln(tw, "  RECEIVED\tEVENT ID\tTYPE")
		for _, m := range replays {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", operations.Stamp(&m.ReceivedAt), m.ReceivedEventID, m.ReceivedEventType)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printBody(out io.Writer, body *operations.Body, bodyErr error) {
	switch {
	case bodyErr != nil:
		fmt.Fprintf(out, "\nBODY: %v\n", bodyErr)
	case !utf8.Valid(body.Bytes):
		fmt.Fprintf(out, "\nBODY (%d bytes from %s) is not UTF-8 text: use --body-out FILE\n", len(body.Bytes), body.From)
	default:
		where := body.From
		if body.From == operations.BodyFromArchive {
			where = "the archive, " + body.ArchiveKey
		}
		// Control characters are escaped: the bytes are the sender's,
		// and --body-out gives them exactly.
		fmt.Fprintf(out, "\nBODY (%d bytes from %s, verified against its sha256)\n%s\n", len(body.Bytes), where, safeText(string(body.Bytes)))
	}
}

// pausedNote says which pause holds a paused event, and when it was due.
func pausedNote(now time.Time, e operations.Event) string {
	note := "held by " + strings.Replace(deref(e.HeldBy), ":", " ", 1)
	if e.HeldDueAt != nil {
		note += ", due " + operations.Ago(now, *e.HeldDueAt)
	}
	return note
}
