package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/manifest"
)

const validateLong = `Validate reads each FILE (a .tlisp source or a LavaArchitecture manifest, "-" for standard
input), runs the whole synthesis (gate, evaluation, rendering) with the manifest's bindings and
gate plus the flags, and prints every diagnostic on stderr as

  file:line:col: severity: message
    the source line
    ^ under the column

A manifest document is first checked as the API server admits it, against the
LavaArchitecture CRD itself (its schema, formats and CEL rules, and the object's metadata: a
DNS-1123 name and namespace), the same check lava up applies to its manifests, and no
namespace/name may be defined twice across the files given; each violation is reported at its
YAML key and the document is not synthesized.

Columns count characters; a caret line copies the tabs of the source line so it lines up. A
quoted line is cut to 120 characters around the column ("…" marks a cut).
Positions inside a manifest's inline source point into the manifest. For each document that
has no error, "LABEL: ok (N resources)" is printed on stdout. The exit code is 1 when any
diagnostic is an error, 0 otherwise (warnings alone do not fail).`

func newValidateCmd() *cobra.Command {
	var flags bindingFlags
	cmd := &cobra.Command{
		Use:     "validate FILE...",
		Short:   "Check .tlisp files and LavaArchitecture manifests and print every diagnostic",
		Long:    validateLong,
		Example: "  lava validate examples/*.yaml examples/cloud/*.yaml\n  lava validate --set zone-id=Z123 dns.tlisp",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := flags.parse()
			if err != nil {
				return err
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			nerr := 0
			defined := manifest.Keys{} // across every file
			for _, path := range args {
				srcs := sources{}
				units, diags, err := readUnits(cmd.InOrStdin(), path, srcs)
				if err != nil {
					fmt.Fprintf(stderr, "%s: error: %v\n", displayName(path), err)
					nerr++
					continue
				}
				for _, d := range diags {
					writeDiag(stderr, d, displayName(path), srcs, true)
				}
				nerr += len(diags.Errors())
				for i := range units {
					if k, at := units[i].Key, units[i].KeyPos; k != "" {
						if pe := defined.Define(k, at.File, at.Line, at.Col); pe != nil {
							writeDiag(stderr, diagnostic(at, tlisp.SeverityError, "%s", pe.Msg), units[i].Label, srcs, true)
							nerr++
							continue
						}
					}
					o.apply(&units[i])
					out, ds := synthesizeUnit(units[i], srcs, o.policy, o.namespace)
					for _, d := range ds {
						writeDiag(stderr, d, units[i].Label, srcs, true)
					}
					nerr += len(ds.Errors())
					if out != nil {
						fmt.Fprintf(stdout, "%s: ok (%s)\n", units[i].Label, plural(len(out.Architecture.Resources), "resource"))
					}
				}
			}
			if nerr > 0 {
				return invalidInputPrinted(fmt.Errorf("%d error(s)", nerr))
			}
			return nil
		},
	}
	flags.register(cmd)
	return cmd
}

// plural returns "1 resource" or "N resources".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sources holds the text of every file a command read, by display name, so diagnostics can
// quote the line they point at.
type sources map[string][]byte

// line returns line n (1-based) of file without its line terminator.
func (s sources) line(file string, n int) (string, bool) {
	data, ok := s[file]
	if !ok || n < 1 {
		return "", false
	}
	lines := strings.Split(string(data), "\n")
	if n > len(lines) {
		return "", false
	}
	return strings.TrimRight(lines[n-1], "\r"), true
}

// writeDiag prints d as "file:line:col: severity: message" ("label: severity: message" when d
// has no position). With quote set, the source line follows with a caret under the column:
// the caret line copies every tab before the column, so it lines up whatever the tab width,
// and columns count characters (runes), as positions do.
func writeDiag(w io.Writer, d tlisp.Diagnostic, label string, srcs sources, quote bool) {
	where := label
	if d.Pos.IsValid() {
		file := d.Pos.File
		if file == "" {
			file = label
		}
		where = fmt.Sprintf("%s:%d:%d", file, d.Pos.Line, d.Pos.Col)
	}
	fmt.Fprintf(w, "%s: %s: %s\n", where, d.Severity, d.Message)
	if !quote || !d.Pos.IsValid() {
		return
	}
	text, ok := srcs.line(d.Pos.File, d.Pos.Line)
	if !ok {
		return
	}
	text, col := quoteWindow(text, d.Pos.Col, maxQuote)
	fmt.Fprintf(w, "  %s\n  %s^\n", text, caretPad(text, col))
}

// maxQuote is the most runes of a source line a diagnostic quotes.
const maxQuote = 120

// quoteWindow cuts text (a source line) to at most limit runes around column col (1-based,
// runes) and returns it with the column the caret goes under in the cut text. A cut side is
// marked with "…" (which counts toward limit).
func quoteWindow(text string, col, limit int) (string, int) {
	r := []rune(text)
	if len(r) <= limit {
		return text, col
	}
	at := min(max(col-1, 0), len(r))
	start := max(at-limit/2, 0)
	end := min(start+limit, len(r))
	start = max(end-limit, 0)
	if start > 0 {
		start++ // room for the leading "…"
	}
	if end < len(r) {
		end-- // room for the trailing "…"
	}
	out := string(r[start:end])
	shift := start
	if start > 0 {
		out = "…" + out
		shift--
	}
	if end < len(r) {
		out += "…"
	}
	return out, col - shift
}

// caretPad returns the whitespace that puts a caret under column col (1-based, in runes) of
// text: a tab for each tab before the column, a space for anything else.
func caretPad(text string, col int) string {
	var b strings.Builder
	i := 1
	for _, r := range text {
		if i >= col {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		i++
	}
	for ; i < col; i++ {
		b.WriteByte(' ')
	}
	return b.String()
}
