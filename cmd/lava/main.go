// Command lava is Lava's command-line interface: render and validate architectures, browse the
// bundled catalog, print the CRDs, run everything locally (`lava up`), read receipts and state.
//
// Exit codes: 0 success, 1 invalid input (diagnostics on stderr), 2 usage error, 3 a server the
// command needs (NATS) cannot be reached.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes of every lava command.
const (
	exitOK      = 0
	exitInvalid = 1
	exitUsage   = 2
	exitUnavail = 3
)

// invalidInputError marks a failure caused by the user's input (exit code 1). Its message has
// already been printed with the diagnostics when printed is true.
type invalidInputError struct {
	err     error
	printed bool
}

func (e *invalidInputError) Error() string { return e.err.Error() }
func (e *invalidInputError) Unwrap() error { return e.err }

// invalidInput wraps err as an invalid-input failure (exit code 1).
func invalidInput(err error) error { return &invalidInputError{err: err} }

// invalidInputPrinted is invalidInput for an error whose diagnostics were already written.
func invalidInputPrinted(err error) error { return &invalidInputError{err: err, printed: true} }

// newRootCmd builds the command tree writing to stdout and stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "lava",
		Short: "Lava: LavaArchitecture synthesis, planning and operation",
		Long: `Lava: LavaArchitecture synthesis, planning and operation.

Exit codes of every command: 0 success, 1 invalid input (diagnostics on stderr; for
"receipts verify" also a chain that does not verify), 2 usage error, 3 a server the command
needs cannot be reached (NATS for receipts, state and events).

The receipts, state and events commands read NATS. The server is
` + natsURLHelp + `.
lava up serves NATS only while it runs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Each subcommand lives in its own file as newXCmd().
	root.AddCommand(subcommands()...)
	return root
}

// run executes the CLI with args and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var inv *invalidInputError
	if errors.As(err, &inv) {
		if !inv.printed {
			fmt.Fprintln(stderr, "lava:", inv.err)
		}
		return exitInvalid
	}
	fmt.Fprintln(stderr, "lava:", err)
	if isUnavailable(err) {
		return exitUnavail
	}
	return exitUsage
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
