package main

import (
	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/engine/runner"
)

// newRunnerCmd is `lava runner`: a provider runner, started by the engine (lava up
// --provider-runner), never by hand.
func newRunnerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "runner",
		Short: "Run tenant providers for an engine (started by lava up --provider-runner)",
		Long: `lava runner is a provider runner: the process the embedded engine starts providers in when
lava up runs with --provider-runner, under its own unprivileged user and Landlock rules. It
reads its configuration (its certificate and key, the engine's certificate, its directories
and the ports it may not connect to) as JSON on standard input, listens on a loopback TCP port
with mutual TLS, writes the port's address on standard output and serves until stopped: each
connection asks it to start one provider, which it serves on a port of its own. Not meant to
be run by hand. docs/design/0038-provider-runner.md.`,
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runner.Main(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
