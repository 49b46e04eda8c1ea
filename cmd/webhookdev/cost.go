package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/webhook-inbox/webhook-inbox/internal/cost"
)

func newCostCmd() *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "Print each deployment profile's monthly cost, computed from the translated template; fail when docs/deploy.md disagrees",
		Long: `cost translates template.yaml as sam deploy would (SAM's translator, which
make setup installs with cfn-lint), evaluates it for each deployment
profile in create mode, and prices the resources it creates with
internal/cost's dated unit prices and usage assumptions: a month at idle
and what one million webhooks a month add. It prints the markdown block
docs/deploy.md holds between its "make cost" markers and fails when the
document's block differs; -w rewrites the document's block instead.
Run it from the repository's root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			block, err := cost.Generate(cmd.Context(), ".")
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), block)
			if write {
				return cost.WriteDoc(".", block)
			}
			return cost.CheckDoc(".", block)
		},
	}
	cmd.Flags().BoolVarP(&write, "write", "w", false, "rewrite docs/deploy.md's block with the figures instead of comparing")
	return cmd
}
