package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

func newQuarantineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "Deliveries refused for their signature or signed time, kept: list, show, re-ingest once the secret is fixed, purge",
		Long: `The receiver keeps a delivery to a configured source, at its right endpoint
and within the body limit, that it refused only for its signature
(signature_mismatch) or its signed time (timestamp_out_of_tolerance): its
body, the headers its kind verifies and identifies it by, the cause, the
request id and when it came. It is never processed as it is. Once the
source's secrets are fixed (a secret rolled at the sender before the
receiver had it), 'quarantine reingest' verifies each again with the
current secrets, at the time it was received, and stores what now verifies
as if it had just arrived. docs/operations.md, "Quarantine and re-ingest".`,
	}
	cmd.AddCommand(newQuarantineListCmd(), newQuarantineShowCmd(), newQuarantineReingestCmd(), newQuarantinePurgeCmd())
	return cmd
}

// quarantineFlags select quarantined deliveries.
type quarantineFlags struct {
	id     int64
	source string
	window timeFlags
}

func (f *quarantineFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.id, "id", 0, "one quarantined delivery, by its id")
	cmd.Flags().StringVar(&f.source, "source", "", "only this source")
	f.window.register(cmd, "received")
}

// selection is the flags' selection, with an id given as the argument.
func (f *quarantineFlags) selection(args []string) (operations.QuarantineSelection, error) {
	if err := idArg(args, &f.id, "a quarantined delivery"); err != nil {
		return operations.QuarantineSelection{}, err
	}
	w, err := f.window.window()
	if err != nil {
		return operations.QuarantineSelection{}, err
	}
	return operations.QuarantineSelection{ID: f.id, Source: f.source, Window: w}, nil
}

func newQuarantineListCmd() *cobra.Command {
	var (
		f quarantineFlags
		l listFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the quarantined deliveries, newest first, with why they were refused (and why a re-ingest still refuses them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := l.check(); err != nil {
				return err
			}
			sel, err := f.selection(nil)
			if err != nil {
				return err
			}
			q := operations.QuarantineQuery{Source: sel.Source, Window: sel.Window}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			var all operations.QuarantinePage
			all.Deliveries, all.NextBefore, all.At, err = readPages(l.limit, 0, func(n int, before int64) (*operations.QuarantinePage, error) {
				q.Limit, q.Before = n, before
				return api.Quarantine(cmd.Context(), q)
			}, func(p *operations.QuarantinePage) ([]operations.Quarantined, *int64, time.Time) {
				return p.Deliveries, p.NextBefore, p.At
			})
			if err != nil {
				return err
			}
			return printList(cmd, l, all, all.Deliveries, all.NextBefore != nil, "no quarantined deliveries match",
				"ID\tSOURCE\tCAUSE\tRECEIVED\tBYTES\tREQUEST ID\tLAST RE-INGEST", func(tw io.Writer, d operations.Quarantined) {
					last := "-"
					if d.TriedAt != nil {
						last = deref(d.LastCause) + ": " + deref(d.LastError)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, d.Source, d.Cause, operations.Stamp(&d.ReceivedAt),
						operations.Bytes(int64(d.BodySize)), oneLine(orDash(d.RequestID), 40), oneLine(last, 80))
				})
		},
	}
	f.register(cmd)
	l.register(cmd, 100)
	return cmd
}

func newQuarantineShowCmd() *cobra.Command {
	var (
		asJSON  bool
		bodyOut string
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one quarantined delivery: why it was refused, the headers kept, and its body (escaped)",
		Long: `show prints one quarantined delivery: its source, cause and time of receipt,
the last re-ingest's failure, the headers kept with it and its body. Nothing
of it is authenticated: the body is printed with control characters
escaped; --body-out FILE writes its raw bytes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("%q is not a quarantined delivery's id", args[0])
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			d, err := api.QuarantinedDelivery(cmd.Context(), id)
			if err != nil {
				return err
			}
			if bodyOut != "" {
				if err := writeBody(cmd, bodyOut, d.Body); err != nil || bodyOut == "-" {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, d)
			}
			printQuarantined(out, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the body base64-encoded)")
	cmd.Flags().StringVar(&bodyOut, "body-out", "", "write the raw body to this file (- for standard output alone)")
	return cmd
}

func printQuarantined(out io.Writer, d *operations.QuarantinedDetail) {
	tw := newTable(out)
	fmt.Fprintf(tw, "QUARANTINED %d\t%s (kind %s)\n", d.ID, d.Source, d.SourceKind)
	fmt.Fprintf(tw, "refused for\t%s\n", d.Cause)
	fmt.Fprintf(tw, "received\t%s\n", operations.Stamp(&d.ReceivedAt))
	fmt.Fprintf(tw, "request id\t%s\n", orDash(d.RequestID))
	fmt.Fprintf(tw, "body\t%s, sha256 %s\n", operations.Bytes(int64(d.BodySize)), d.BodySHA256)
	if d.TriedAt != nil {
		fmt.Fprintf(tw, "last re-ingest\t%s: %s: %s\n", operations.Stamp(d.TriedAt), deref(d.LastCause), oneLine(deref(d.LastError), 200))
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "\nHEADERS KEPT")
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range d.Headers[k] {
			fmt.Fprintf(out, "%s: %s\n", safeText(k), safeText(v))
		}
	}
	more := ""
	if d.BodyTruncated {
		more = fmt.Sprintf(", the first %d shown: --body-out FILE writes them", len(d.Body))
	}
	if !utf8.Valid(d.Body) {
		fmt.Fprintf(out, "\nBODY (%d bytes%s) is not UTF-8 text: use --body-out FILE\n", d.BodySize, more)
		return
	}
	// Control characters are escaped: the bytes are an unauthenticated
	// sender's, and --body-out gives them exactly.
	fmt.Fprintf(out, "\nBODY (%d bytes, not authenticated%s)\n%s\n", d.BodySize, more, safeText(string(d.Body)))
}

func newQuarantineReingestCmd() *cobra.Command {
	var (
		f                   quarantineFlags
		by                  actorFlags
		all                 bool
		dryRun, yes, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "reingest [ID]",
		Short: "Verify quarantined deliveries again with the current secrets and store those that now verify; without --yes, says how many",
		Long: `reingest verifies the selected quarantined deliveries (the one whose id is
given, or by --source and window, or --all) again, each with its source's
secrets as the sources document holds them now and at the time it was
received, so that a signed timestamp that was fine then is not refused for
its age now. What verifies is stored exactly as the receiver stores a
delivery (deduplicated: an event already stored is a duplicate) and the
processor is woken; it leaves the quarantine. What still fails stays, with
its new failure ('quarantine list' shows it). The re-ingest is recorded
with who ran it (--actor) and why (--reason).

Fix the source first (add the sender's new secret to the sources
document). Without --yes (or with --dry-run) it only counts the
deliveries; --yes re-ingests exactly that count, or nothing if it changed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := f.selection(args)
			if err != nil {
				return err
			}
			sel.All = all
			if sel.IsZero() {
				return errors.New("give a quarantined delivery's id, --source, a time window, or --all")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			out := cmd.OutOrStdout()
			dry, err := api.Reingest(cmd.Context(), operations.ReingestRequest{Select: sel, DryRun: true})
			if err != nil {
				return err
			}
			if dryRun || !yes {
				if asJSON {
					return writeJSON(out, dry)
				}
				fmt.Fprintf(out, "dry run: %d quarantined deliveries would be verified again", dry.Matched)
				if !dryRun {
					fmt.Fprint(out, "; run it again with --yes to re-ingest them")
				}
				fmt.Fprintln(out)
				return nil
			}
			res, err := api.Reingest(cmd.Context(), operations.ReingestRequest{Select: sel, Expect: &dry.Matched, Reason: by.reason})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(out, res)
			}
			fmt.Fprintf(out, "re-ingested %d deliveries: %d stored, %d already stored, %d still refused (kept)\n",
				len(res.Deliveries), res.Stored, res.Duplicates, res.Refused)
			tw := newTable(out)
			for _, d := range res.Deliveries {
				switch d.Outcome {
				case operations.ReingestRefused:
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s: %s\n", d.ID, d.Source, d.Outcome, deref(d.Cause), oneLine(deref(d.Error), 80))
				default:
					fmt.Fprintf(tw, "%d\t%s\t%s\tevent %d (%s)\n", d.ID, d.Source, d.Outcome, *d.Event, oneLine(deref(d.EventID), 60))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if res.More {
				fmt.Fprintf(out, "(at most %d a call: run it again for the rest)\n", operations.ReingestPerCall)
			}
			return nil
		},
	}
	f.register(cmd)
	by.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "every quarantined delivery")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&yes, "yes", false, "re-ingest: without it, only count")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newQuarantinePurgeCmd() *cobra.Command {
	var (
		f                   quarantineFlags
		by                  actorFlags
		dryRun, yes, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "purge [ID]",
		Short: "Delete quarantined deliveries (one, or a source's); without --yes, says how many",
		Long: `purge deletes the quarantined delivery whose id is given, or those of
--source (within a window, or all of them): forged deliveries, or ones the
sender has since delivered again. It is recorded with who ran it (--actor)
and why (--reason). Without --yes (or with --dry-run) it only counts.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := f.selection(args)
			if err != nil {
				return err
			}
			if sel.ID == 0 && sel.Source == "" {
				return errors.New("give a quarantined delivery's id or --source")
			}
			api, closeAPI, err := openAPI(cmd)
			if err != nil {
				return err
			}
			defer closeAPI()
			out := cmd.OutOrStdout()
			dry, err := api.Purge(cmd.Context(), operations.PurgeRequest{Select: sel, DryRun: true})
			if err != nil {
				return err
			}
			if dryRun || !yes {
				if asJSON {
					return writeJSON(out, dry)
				}
				fmt.Fprintf(out, "dry run: %d quarantined deliveries would be deleted", dry.Deliveries)
				if !dryRun {
					fmt.Fprint(out, "; run it again with --yes to delete them")
				}
				fmt.Fprintln(out)
				return nil
			}
			res, err := api.Purge(cmd.Context(), operations.PurgeRequest{Select: sel, Expect: &dry.Deliveries, Reason: by.reason})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(out, res)
			}
			fmt.Fprintf(out, "purged %d quarantined deliveries (action %d)\n", res.Deliveries, res.ActionID)
			return nil
		},
	}
	f.register(cmd)
	by.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count, change nothing (the default without --yes)")
	cmd.Flags().BoolVar(&yes, "yes", false, "purge: without it, only count")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
