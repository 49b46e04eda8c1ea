package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/checkout"
	"github.com/webhook-inbox/webhook-inbox/internal/scaffold"
	"github.com/webhook-inbox/webhook-inbox/shared/handlers"
	"github.com/webhook-inbox/webhook-inbox/shared/processor"
)

func newNewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Write new code from the project's patterns (new handler)",
	}
	cmd.AddCommand(newNewHandlerCmd())
	return cmd
}

func newNewHandlerCmd() *cobra.Command {
	var spec scaffold.Spec
	cmd := &cobra.Command{
		Use:   "handler NAME (--kind KIND | --source SOURCE) --type TYPE",
		Short: "Write a handler package, its table, its test and its registration",
		Long: `handler writes shared/handlers/NAME/, following the example packages
(CONTRIBUTING.md, "Adding a handler"): the handler (it decodes the event and
records it, once, in the table NAME_events), its goose migration, its Schema,
its test (run as the processor's database role, on a copy of
dev/samples/KIND.json) and its two lines in shared/handlers/local.go. It
never overwrites: an existing package is refused.

--kind routes the handler to every source of that kind; --source to one
configured source by name (its kind, for the payload's shape, is read from
the sources webhookdev uses: dev/sources.json by default).

  go run ./cmd/webhookdev new handler paidinvoices --kind stripe --type invoice.paid
  go test ./shared/handlers/paidinvoices/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			switch {
			case spec.Source != "" && spec.Kind != "":
				return errors.New("--kind or --source, not both: --source routes to one source, whose kind is configured")
			case spec.Source != "":
				sources, where, err := checkout.LoadSources(cmd.Context(), os.Getenv)
				if err != nil {
					return err
				}
				src, ok := sources.Lookup(spec.Source)
				if !ok {
					return fmt.Errorf("no source named %q in %s (configured: %v): add it there first, or use --kind", spec.Source, where, sources.Names())
				}
				spec.Kind = src.Kind
			case spec.Kind == "":
				return errors.New("--kind or --source says which events the handler serves")
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			root, err := scaffold.FindRoot(wd)
			if err != nil {
				return err
			}
			res, err := scaffold.Write(root, spec)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, f := range res.Files {
				fmt.Fprintln(out, "wrote", f)
			}
			reg := processor.NewRegistry()
			handlers.Register(reg) // as it was before this run: the new package is not compiled in
			if clash := scaffold.Clash(reg, spec); clash != "" {
				fmt.Fprintln(out, "\nnote:", clash)
			}
			fmt.Fprintf(out, "\nnext: edit %s/%s.go, then\n  go test ./%s/\n  make dev   # and send it an event: dev/samples/README.md\n", res.Dir, spec.Name, res.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Kind, "kind", "", "route every source of this kind to the handler (stripe, standard, github, square, shopify, hmac)")
	cmd.Flags().StringVar(&spec.Source, "source", "", "route one configured source, by name, to the handler")
	cmd.Flags().StringVar(&spec.Type, "type", "", "the event type it serves (invoice.paid; * for every type)")
	return cmd
}
