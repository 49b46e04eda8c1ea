package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
	"github.com/webhook-inbox/webhook-inbox/shared/source"
)

// otherTypes stands for the types no exact route names, in a source's
// rows.
const otherTypes = "(any other type)"

func newHandlersCmd(register func(*processor.Registry)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "handlers",
		Short: "List which handler serves which source or kind and event type, as the processor routes (local only)",
		Long: `handlers lists the routes shared/handlers.Register wires, in the order the
processor tries them for an event (source name and type, source name and any
type, kind and type, kind and any type, then the fallback), each with where it
was registered (function, file:line). Then, per source of the sources document
(WEBHOOK_SOURCES, WEBHOOK_SOURCES_FILE, or dev/sources.json when neither is
set), the route each of its event types goes to, and every kind route a route
by the source's name shadows.

It is local only: it lists the handlers compiled into this webhookctl, not
those of a deployed stack (--stack and --operator-url do not apply). Build
webhookctl from the commit you deployed to see the deployed routes. A route
registered twice fails the command as it fails the processor's start-up.

'handlers pause ROUTE' and 'handlers resume ROUTE' hold a route's events
back from the processor and let them go: they act on the stack, as every
other command does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Flags only: an exported WEBHOOK_INBOX_STACK is meant for the
			// other commands.
			if slices.ContainsFunc([]string{"stack", "operator-url", "via-api"}, cmd.Flags().Changed) {
				return errors.New("handlers lists the handlers compiled into this webhookctl, not a stack's: run it without --stack, --operator-url or --via-api (set WEBHOOK_SOURCES_FILE for a deployed sources document)")
			}
			reg := processor.NewRegistry()
			register(reg)
			if err := reg.Err(); err != nil {
				return err
			}
			rep := routesReport(reg)
			sources, where, err := checkout.LoadSources(cmd.Context(), envOf(cmd))
			switch {
			case err == nil:
				rep.addSources(reg, sources, where)
			case where == checkout.SourcesFile && errors.Is(err, fs.ErrNotExist):
				// Outside a checkout, with no document configured: the
				// routes alone still answer.
				rep.SourcesNote = "no sources document (WEBHOOK_SOURCES, WEBHOOK_SOURCES_FILE or ./" + checkout.SourcesFile + "): routes by kind apply to every source of that kind"
			default:
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			return rep.print(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	// Its pause and resume act on the stack, as every other command.
	cmd.AddCommand(newPauseCmds(inbox.PauseHandler, func(route string) bool {
		reg := processor.NewRegistry()
		register(reg)
		return slices.ContainsFunc(reg.Routes(), func(rt processor.Route) bool { return rt.String() == route })
	})...)
	return cmd
}

// routeRow is one route, as the report prints it.
type routeRow struct {
	Source string `json:"source,omitempty"`
	Kind   string `json:"kind,omitempty"`
	// Type is the event type, "*" for any type; empty for the fallback.
	Type     string `json:"type,omitempty"`
	Fallback bool   `json:"fallback,omitempty"`
	Route    string `json:"route"`
	Site     string `json:"registered_by"`
}

func toRow(rt processor.Route) routeRow {
	return routeRow{Source: rt.Match.SourceName(), Kind: rt.Match.KindName(), Type: rt.Type, Fallback: rt.Fallback(), Route: rt.String(), Site: rt.Site}
}

// sourceType is where one event type of a source goes.
type sourceType struct {
	Type string `json:"type"`
	// Route is nil for an unhandled type.
	Route *routeRow `json:"route"`
}

type sourceRoutes struct {
	Name  string       `json:"name"`
	Kind  string       `json:"kind"`
	Types []sourceType `json:"types"`
}

type shadowRow struct {
	Source string   `json:"source"`
	Route  routeRow `json:"route"`
	// Shadows is the kind route that never sees the source's events.
	Shadows routeRow `json:"shadows"`
	Line    string   `json:"line"`
}

type handlersReport struct {
	Routes      []routeRow     `json:"routes"`
	SourcesFrom string         `json:"sources_from,omitempty"`
	SourcesNote string         `json:"sources_note,omitempty"`
	Sources     []sourceRoutes `json:"sources,omitempty"`
	Shadows     []shadowRow    `json:"shadows,omitempty"`
}

func routesReport(reg *processor.Registry) *handlersReport {
	rep := &handlersReport{Routes: []routeRow{}}
	for _, rt := range reg.Routes() {
		rep.Routes = append(rep.Routes, toRow(rt))
	}
	return rep
}

// addSources resolves, per source, each type a route names for the source
// or its kind, then the other types, exactly as the processor's Lookup does.
func (rep *handlersReport) addSources(reg *processor.Registry, sources *source.Set, where string) {
	rep.SourcesFrom = where
	kinds := map[string]string{}
	for _, name := range sources.Names() {
		src, _ := sources.Lookup(name)
		kinds[name] = src.Kind
		var types []string
		for _, rt := range reg.Routes() {
			if (rt.Match == processor.Source(name) || rt.Match == processor.Kind(src.Kind)) && rt.Type != processor.AnyType {
				types = append(types, rt.Type)
			}
		}
		slices.Sort(types)
		sr := sourceRoutes{Name: name, Kind: src.Kind, Types: []sourceType{}}
		for _, typ := range append(slices.Compact(types), otherTypes) {
			lookup := typ
			if typ == otherTypes {
				lookup = processor.AnyType // a type no exact route names
			}
			st := sourceType{Type: typ}
			if rt, ok := reg.Resolve(name, src.Kind, lookup); ok {
				row := toRow(rt)
				st.Route = &row
			}
			sr.Types = append(sr.Types, st)
		}
		rep.Sources = append(rep.Sources, sr)
	}
	for _, s := range reg.Shadows(kinds) {
		rep.Shadows = append(rep.Shadows, shadowRow{Source: s.Source, Route: toRow(s.By), Shadows: toRow(s.Kind), Line: s.String()})
	}
}

func (rep *handlersReport) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d routes, in the order the processor tries them\n\n", len(rep.Routes))
	fmt.Fprintln(tw, "ROUTE\tREGISTERED BY")
	fallback := false
	for _, r := range rep.Routes {
		fmt.Fprintf(tw, "%s\t%s\n", r.Route, r.Site)
		fallback = fallback || r.Fallback
	}
	if !fallback {
		fmt.Fprintln(tw, "(no fallback: an event no route matches follows PROCESSOR_UNHANDLED)")
	}
	if rep.SourcesNote != "" {
		fmt.Fprintf(tw, "\n%s\n", rep.SourcesNote)
		return tw.Flush()
	}
	fmt.Fprintf(tw, "\n%d sources from %s, each event type and the route it goes to\n\n", len(rep.Sources), rep.SourcesFrom)
	fmt.Fprintln(tw, "SOURCE\tKIND\tTYPE\tROUTE\tREGISTERED BY")
	for _, s := range rep.Sources {
		for _, t := range s.Types {
			if t.Route == nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\tunhandled (PROCESSOR_UNHANDLED)\n", s.Name, s.Kind, t.Type)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, t.Type, t.Route.Route, t.Route.Site)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Shadows) > 0 {
		lines := make([]string, len(rep.Shadows))
		for i, s := range rep.Shadows {
			lines[i] = "  " + s.Line
		}
		what := "kind routes shadowed by routes by source name"
		if len(lines) == 1 {
			what = "kind route shadowed by a route by source name"
		}
		fmt.Fprintf(w, "\n%d %s (an intended override, or a mistake):\n%s\n", len(lines), what, strings.Join(lines, "\n"))
	}
	return nil
}
