package main

import "github.com/spf13/cobra"

// subcommands lists every lava subcommand; add one line per command.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newRenderCmd(),
		newValidateCmd(),
		newCatalogCmd(),
		newCRDsCmd(), newCRDCmd(),
		newStateCmd(),
		newPlanCmd(), newApproveCmd(), newReconcileCmd(),
		newReceiptsCmd(),
		newEventsCmd(),
		newUpCmd(),
		newNATSCmd(),
		newRunnerCmd(),
	}
}
