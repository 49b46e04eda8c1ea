package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/storage"
)

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "List events, or show one in full with its attempts, errors and raw body"}
	cmd.AddCommand(newEventsListCmd(), newEventsShowCmd())
	return cmd
}

// eventJSON is an event in `events list --json`.
type eventJSON struct {
	ID            int64      `json:"id"`
	Source        string     `json:"source"`
	EventID       string     `json:"event_id"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	Outcome       *string    `json:"outcome"`
	Attempts      int        `json:"attempts"`
	ReceivedAt    time.Time  `json:"received_at"`
	ProcessedAt   *time.Time `json:"processed_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	DeadAt        *time.Time `json:"dead_at"`
	LastError     *string    `json:"last_error"`
	BodySize      int        `json:"body_size"`
}

func eventToJSON(now time.Time, e *inbox.Event) eventJSON {
	j := eventJSON{
		ID: e.ID, Source: e.Source, EventID: e.EventID, Type: e.Type, State: string(e.State(now)),
		Outcome: orNull(string(e.Outcome)), Attempts: e.Attempts, ReceivedAt: e.CreatedAt, ProcessedAt: e.ProcessedAt,
		DeadAt: e.DeadAt, LastError: orNull(e.LastError), BodySize: e.BodySize,
	}
	if e.ProcessedAt == nil && e.DeadAt == nil {
		// Only meaningful while the event waits for the processor.
		next := e.NextAttemptAt
		j.NextAttemptAt = &next
	}
	return j
}

func newEventsListCmd() *cobra.Command {
	var (
		source, typ, state string
		window             timeFlags
		limit              int
		before             int64
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first, by source, type, state and time received",
		Long: fmt.Sprintf(`list prints the events matching the filters, newest first, at most --limit;
--before ID pages on (the JSON's next_before).

States: %v. The backlog is pending + retrying + in_flight;
processed and archived events are done (archived: body in S3); dead events
are in the dead letters (see dead-letters list).`, inbox.EventStates()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := inbox.ParseEventState(state)
			if err != nil {
				return fmt.Errorf("--state: %w", err)
			}
			if limit <= 0 || limit > 10000 {
				return fmt.Errorf("--limit must be 1 to 10000")
			}
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			now, err := o.store.PGNow(ctx)
			if err != nil {
				return err
			}
			from, to, err := window.window(now)
			if err != nil {
				return err
			}
			evs, err := o.store.EventList(ctx, storage.EventFilter{
				Source: source, EventType: typ, State: st, CreatedFrom: from, CreatedTo: to, BeforeID: before,
			}, now, limit)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var next *int64
			if len(evs) == limit {
				next = &evs[len(evs)-1].ID
			}
			if asJSON {
				list := make([]eventJSON, len(evs))
				for i, e := range evs {
					list[i] = eventToJSON(now, e)
				}
				return writeJSON(out, map[string]any{"events": list, "next_before": next})
			}
			if len(evs) == 0 {
				fmt.Fprintln(out, "no events match")
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "ID\tSOURCE\tEVENT ID\tTYPE\tSTATE\tATTEMPTS\tRECEIVED\tNOTE")
			for _, e := range evs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, e.Source, oneLine(e.EventID, 40), oneLine(e.Type, 40),
					e.State(now), e.Attempts, ago(now, e.CreatedAt), eventNote(now, e))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != nil {
				fmt.Fprintf(out, "(more: --before %d)\n", *next)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&source, "source", "", "only this source")
	cmd.Flags().StringVar(&typ, "type", "", "only this event type")
	cmd.Flags().StringVar(&state, "state", "", fmt.Sprintf("only this state: %v", inbox.EventStates()))
	window.register(cmd, "received")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many")
	cmd.Flags().Int64Var(&before, "before", 0, "only events with a smaller id (paging)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// eventNote is the list's last column: what is next, or how it ended.
func eventNote(now time.Time, e *inbox.Event) string {
	switch e.State(now) {
	case inbox.StateProcessed, inbox.StateArchived:
		return fmt.Sprintf("%s %s", e.Outcome, ago(now, *e.ProcessedAt))
	case inbox.StateDead:
		return "dead " + ago(now, *e.DeadAt) + ": " + oneLine(e.LastError, 60)
	case inbox.StateExpunged:
		return "body erased"
	case inbox.StateInFlight:
		return "lease ends " + ago(now, e.NextAttemptAt)
	case inbox.StateRetrying:
		return "next attempt " + ago(now, e.NextAttemptAt) + ": " + oneLine(e.LastError, 60)
	default:
		return "due " + ago(now, e.NextAttemptAt)
	}
}

// attemptJSON is one entry of an event's error history.
type attemptJSON struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Cause   string    `json:"cause"`
	Error   string    `json:"error"`
}

type deadLetterJSON struct {
	ID         int64         `json:"id"`
	EventPK    int64         `json:"event"`
	Source     string        `json:"source"`
	EventID    string        `json:"event_id"`
	Type       string        `json:"type"`
	Attempts   int           `json:"attempts"`
	LastError  *string       `json:"last_error"`
	Errors     []attemptJSON `json:"errors"`
	DeadAt     time.Time     `json:"dead_at"`
	RequeuedAt *time.Time    `json:"requeued_at"`
}

func deadLetterToJSON(d *inbox.DeadLetter) deadLetterJSON {
	return deadLetterJSON{
		ID: d.ID, EventPK: d.EventPK, Source: d.Source, EventID: d.EventID, Type: d.Type,
		Attempts: d.Attempts, LastError: orNull(d.LastError), Errors: attemptsJSON(d.Errors), DeadAt: d.DeadAt, RequeuedAt: d.RequeuedAt,
	}
}

type mismatchJSON struct {
	ReceivedAt     time.Time `json:"received_at"`
	ReceivedSize   int       `json:"received_size"`
	ReceivedSHA256 string    `json:"received_sha256"`
	// Cause is payload_mismatch (this id, another body) or
	// suspected_replay (this body under ReceivedEventID and
	// ReceivedEventType; not stored, not processed).
	Cause             inbox.Cause `json:"cause"`
	ReceivedEventID   string      `json:"received_event_id,omitempty"`
	ReceivedEventType string      `json:"received_event_type,omitempty"`
}

// eventShowJSON is `events show --json`.
type eventShowJSON struct {
	eventJSON
	SourceKind    string            `json:"source_kind"`
	BodySHA256    string            `json:"body_sha256"`
	Metadata      map[string]string `json:"metadata"`
	ClaimedUntil  *time.Time        `json:"claimed_until"`
	ClaimedBy     *string           `json:"claimed_by"`
	FailedInRun   int               `json:"failed_attempts"`
	Solo          bool              `json:"solo"`
	ArchiveKey    *string           `json:"archive_key"`
	ArchiveOffset *int64            `json:"archive_offset"`
	ArchiveLength *int64            `json:"archive_length"`
	ArchivedAt    *time.Time        `json:"archived_at"`
	ExpungedAt    *time.Time        `json:"expunged_at"`
	History       []historyJSON     `json:"history"`
	Actions       []actionJSON      `json:"actions"`
	DeadLetters   []deadLetterJSON  `json:"dead_letters"`
	Mismatches    []mismatchJSON    `json:"payload_mismatches"`
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
			o, err := openOps(cmd)
			if err != nil {
				return err
			}
			defer o.close()
			ctx := cmd.Context()
			now, err := o.store.PGNow(ctx)
			if err != nil {
				return err
			}
			e, err := ref.get(ctx, o.store)
			if err != nil {
				return err
			}
			hist, err := o.store.AttemptListByEvent(ctx, e.ID)
			if err != nil {
				return err
			}
			acts, err := o.store.OperatorActionListByEvent(ctx, e.ID)
			if err != nil {
				return err
			}
			dls, err := o.store.DeadLetterListByEvent(ctx, e.ID)
			if err != nil {
				return err
			}
			mms, err := o.store.PayloadMismatchListByEvent(ctx, e.Source, e.EventID)
			if err != nil {
				return err
			}
			var body []byte
			var from string
			var bodyErr error
			if !noBody || bodyOut != "" {
				body, from, bodyErr = readEventBody(o, e)
			}

			if bodyOut != "" {
				if bodyErr != nil {
					return bodyErr
				}
				if bodyOut == "-" {
					// The raw bytes, on purpose (for a pipe or a file): the one
					// output that is not escaped, so never to a terminal.
					out := raw(cmd.OutOrStdout())
					if isTerminal(out) {
						return errors.New("--body-out - writes the raw body, control characters included: redirect it to a file or a pipe")
					}
					_, err := out.Write(body)
					return err
				}
				if err := os.WriteFile(bodyOut, body, 0o600); err != nil {
					return err
				}
			}

			out := cmd.OutOrStdout()
			if asJSON {
				j := eventShowJSON{
					eventJSON: eventToJSON(now, e), SourceKind: e.SourceKind, BodySHA256: hex.EncodeToString(e.BodySHA256),
					Metadata: e.Metadata, ClaimedUntil: e.ClaimedUntil, ClaimedBy: orNull(e.ClaimedBy), ArchiveKey: orNull(e.ArchiveKey),
					FailedInRun: e.FailedAttempts, Solo: e.Solo, ArchivedAt: e.ArchivedAt, ExpungedAt: e.ExpungedAt,
					History: historyToJSON(hist), Actions: []actionJSON{}, DeadLetters: []deadLetterJSON{}, Mismatches: []mismatchJSON{},
				}
				if e.ArchiveKey != "" {
					j.ArchiveOffset, j.ArchiveLength = &e.ArchiveOffset, &e.ArchiveLength
				}
				for _, a := range acts {
					j.Actions = append(j.Actions, actionToJSON(a))
				}
				for _, d := range dls {
					j.DeadLetters = append(j.DeadLetters, deadLetterToJSON(d))
				}
				for _, m := range mms {
					j.Mismatches = append(j.Mismatches, mismatchJSON{m.ReceivedAt, m.ReceivedSize, hex.EncodeToString(m.ReceivedSHA256),
						m.Cause, m.ReceivedEventID, m.ReceivedEventType})
				}
				switch {
				case bodyErr != nil:
					j.BodyError = bodyErr.Error()
				case body != nil && !noBody && utf8.Valid(body):
					s := string(body)
					j.Body, j.BodyFrom = &s, from
				case body != nil && !noBody:
					j.BodyBase64, j.BodyFrom = body, from
				}
				if err := writeJSON(out, j); err != nil {
					return err
				}
			} else {
				if err := printEvent(out, now, e, hist, acts, dls, mms); err != nil {
					return err
				}
				if !noBody {
					printBody(out, e, body, from, bodyErr)
				}
			}
			if bodyErr != nil && !errors.Is(bodyErr, errExpunged) {
				return fmt.Errorf("the body of event %d could not be read: %w", e.ID, bodyErr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the body as text, or body_base64 when it is not UTF-8)")
	cmd.Flags().BoolVar(&noBody, "no-body", false, "do not read or print the body")
	cmd.Flags().StringVar(&bodyOut, "body-out", "", "write the raw body to this file (- for standard output alone)")
	return cmd
}

// errExpunged is the body of an expunged event: gone on purpose.
var errExpunged = errors.New("the body was expunged (erased on request)")

// readEventBody returns the raw body and where it came from: Postgres
// while it is there (checked against the recorded hash), else the archive.
func readEventBody(o *ops, e *inbox.Event) ([]byte, string, error) {
	switch {
	case e.ExpungedAt != nil:
		return nil, "", errExpunged
	case e.Body != nil:
		sum := sha256.Sum256(e.Body)
		if len(e.Body) != e.BodySize || !bytes.Equal(sum[:], e.BodySHA256) {
			return nil, "", fmt.Errorf("the stored body does not match the hash recorded at receipt (%d bytes sha256 %x, recorded %d bytes sha256 %x)",
				len(e.Body), sum, e.BodySize, e.BodySHA256)
		}
		return e.Body, "postgres", nil
	case e.ArchiveKey == "":
		return nil, "", errors.New("the event has neither a body in Postgres nor an archive location")
	}
	cfg, err := o.archiveConfig()
	if err != nil {
		return nil, "", fmt.Errorf("the body is archived in %s: %w", e.ArchiveKey, err)
	}
	a, err := o.archiver(cfg)
	if err != nil {
		return nil, "", err
	}
	body, err := a.Body(o.cmd.Context(), e)
	if err != nil {
		return nil, "", err
	}
	return body, "archive", nil
}

func attemptsJSON(errs []inbox.AttemptError) []attemptJSON {
	out := make([]attemptJSON, len(errs))
	for i, a := range errs {
		out[i] = attemptJSON{Attempt: a.Attempt, At: a.At, Cause: string(a.Cause), Error: a.Error}
	}
	return out
}

// historyJSON is one attempt of an event's history.
type historyJSON struct {
	Attempt    int        `json:"attempt"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Outcome    string     `json:"outcome"`
	Cause      *string    `json:"cause"`
	Error      *string    `json:"error"`
	Dead       bool       `json:"dead"`
	Processor  *string    `json:"processor"`
	BatchSize  int        `json:"batch_size"`
}

func historyToJSON(hist []inbox.Attempt) []historyJSON {
	out := make([]historyJSON, len(hist))
	for i, a := range hist {
		out[i] = historyJSON{
			Attempt: a.Number, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Outcome: string(a.Outcome),
			Cause: orNull(string(a.Cause)), Error: orNull(a.Error), Dead: a.Dead, Processor: orNull(a.Processor), BatchSize: a.BatchSize,
		}
	}
	return out
}

func printEvent(out io.Writer, now time.Time, e *inbox.Event, hist []inbox.Attempt, acts []inbox.OperatorAction,
	dls []*inbox.DeadLetter, mms []inbox.PayloadMismatch) error {
	tw := newTable(out)
	kind := ""
	if e.SourceKind != "" {
		kind = " (kind " + e.SourceKind + ")"
	}
	fmt.Fprintf(tw, "EVENT %d\t%s/%s%s\n", e.ID, e.Source, e.EventID, kind)
	fmt.Fprintf(tw, "  type\t%s\n", e.Type)
	fmt.Fprintf(tw, "  state\t%s\n", e.State(now))
	fmt.Fprintf(tw, "  received\t%s (%s)\n", stamp(&e.CreatedAt), ago(now, e.CreatedAt))
	if e.ProcessedAt != nil {
		fmt.Fprintf(tw, "  processed\t%s (%s), outcome %s\n", stamp(e.ProcessedAt), ago(now, *e.ProcessedAt), e.Outcome)
	} else if e.DeadAt == nil && e.State(now) != inbox.StateInFlight {
		fmt.Fprintf(tw, "  next attempt\t%s (%s)\n", stamp(&e.NextAttemptAt), ago(now, e.NextAttemptAt))
	}
	fmt.Fprintf(tw, "  attempts\t%d, %d failed in this run%s\n", e.Attempts, e.FailedAttempts, map[bool]string{true: "; runs alone", false: ""}[e.Solo])
	if e.ClaimedUntil != nil {
		fmt.Fprintf(tw, "  claimed\tuntil %s (%s), by %s\n", stamp(e.ClaimedUntil), ago(now, *e.ClaimedUntil), oneLine(e.ClaimedBy, 120))
	}
	if e.LastError != "" {
		fmt.Fprintf(tw, "  last error\t%s\n", oneLine(e.LastError, 200))
	}
	if e.DeadAt != nil {
		fmt.Fprintf(tw, "  dead\t%s (%s): in the dead letters\n", stamp(e.DeadAt), ago(now, *e.DeadAt))
	}
	if e.ArchiveKey != "" {
		fmt.Fprintf(tw, "  archived\t%s in %s [%d, +%d)\n", stamp(e.ArchivedAt), e.ArchiveKey, e.ArchiveOffset, e.ArchiveLength)
	}
	if e.ExpungedAt != nil {
		fmt.Fprintf(tw, "  expunged\t%s\n", stamp(e.ExpungedAt))
	}
	fmt.Fprintf(tw, "  body\t%d bytes, sha256 %x\n", e.BodySize, e.BodySHA256)
	if len(e.Metadata) > 0 {
		keys := make([]string, 0, len(e.Metadata))
		for k := range e.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "  metadata\t%s = %s\n", oneLine(k, 80), oneLine(e.Metadata[k], 200))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(hist) > 0 {
		fmt.Fprintf(out, "\nHISTORY\n")
		tw = newTable(out)
		fmt.Fprintln(tw, "  #\tSTARTED\tTOOK\tOUTCOME\tCAUSE\tBATCH\tPROCESSOR\tERROR")
		for _, a := range hist {
			took, outcome := "-", string(a.Outcome)
			if a.FinishedAt != nil {
				took = a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
			}
			if a.Dead {
				outcome += ", dead"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.Number, stamp(&a.StartedAt), took, outcome,
				orDash(string(a.Cause)), a.BatchSize, orDash(oneLine(a.Processor, 60)), oneLine(a.Error, 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(acts) > 0 {
		fmt.Fprintf(out, "\nOPERATOR ACTIONS\n")
		if err := printActions(out, acts); err != nil {
			return err
		}
	}
	if len(dls) > 0 {
		fmt.Fprintf(out, "\nDEAD LETTERS\n")
		tw = newTable(out)
		fmt.Fprintln(tw, "  ID\tDEAD AT\tREQUEUED AT\tATTEMPTS\tLAST ERROR")
		for _, d := range dls {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", d.ID, stamp(&d.DeadAt), stamp(d.RequeuedAt), d.Attempts, oneLine(d.LastError, 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var changed, replays []inbox.PayloadMismatch
	for _, m := range mms {
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
			fmt.Fprintf(tw, "  %s\t%d\t%x\n", stamp(&m.ReceivedAt), m.ReceivedSize, m.ReceivedSHA256)
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
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", stamp(&m.ReceivedAt), m.ReceivedEventID, m.ReceivedEventType)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func printBody(out io.Writer, e *inbox.Event, body []byte, from string, bodyErr error) {
	switch {
	case bodyErr != nil:
		fmt.Fprintf(out, "\nBODY: %v\n", bodyErr)
	case !utf8.Valid(body):
		fmt.Fprintf(out, "\nBODY (%d bytes from %s) is not UTF-8 text: use --body-out FILE\n", len(body), from)
	default:
		where := from
		if from == "archive" {
			where = "the archive, " + e.ArchiveKey
		}
		// Control characters are shown as U+FFFD: the bytes are the
		// sender's, and --body-out gives them exactly.
		fmt.Fprintf(out, "\nBODY (%d bytes from %s, verified against its sha256)\n%s\n", len(body), where, safeText(string(body)))
	}
}
