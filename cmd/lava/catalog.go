package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// bundledSource returns the .tlisp text of a bundled architecture.
func bundledSource(name string) ([]byte, bool) {
	e, ok := catalog.Get(name)
	if !ok {
		return nil, false
	}
	return e.Source, true
}

func newCatalogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Browse the bundled architectures and their interfaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newCatalogLsCmd(), newCatalogShowCmd())
	return cmd
}

func newCatalogLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the bundled architectures",
		Long: `List prints one line per bundled architecture: its name, the number of resources it
renders with its default inputs (the catalog's minimum), the number of inputs and required
inputs of its interface, and the interface's description.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tRESOURCES\tINPUTS\tREQUIRED\tDESCRIPTION")
			for _, e := range catalog.List() {
				inputs, required, doc := 0, 0, ""
				if e.Interface != nil {
					inputs, doc = len(e.Interface.Inputs), e.Interface.Doc
					for _, f := range e.Interface.Inputs {
						if f.Required && f.Default == nil {
							required++
						}
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", e.Name, e.MinResources, inputs, required, truncate(doc, 80))
			}
			return tw.Flush()
		},
	}
}

func newCatalogShowCmd() *cobra.Command {
	var source bool
	cmd := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a bundled architecture: inputs, resources, outputs and interface",
		Long: `Show prints a bundled architecture: its inputs (the interface's type, whether the gate
requires it, the architecture's default, the description), the resources and data sources it
declares (name templates as written, with the loop, :count or :when that multiplies them), its
outputs, and its interface's outputs. With --source it prints the .tlisp file instead.`,
		Example: "  lava catalog show aws-vpc-network\n  lava catalog show --source dns-record-set > dns.tlisp",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, ok := catalog.Get(args[0])
			if !ok {
				return invalidInput(fmt.Errorf("unknown bundled architecture %q (see `lava catalog ls`)", args[0]))
			}
			w := cmd.OutOrStdout()
			if source {
				_, err := w.Write(e.Source)
				return err
			}
			return showEntry(w, e.Name, e.Source, e.Interface, e.MinResources)
		},
	}
	cmd.Flags().BoolVar(&source, "source", false, "print the architecture's .tlisp source")
	return cmd
}

// showEntry writes the description of one bundled architecture: its header, then the
// sections Inputs, Resources (with data sources, outputs or result) and Interface.
func showEntry(w io.Writer, name string, src []byte, iface *arch.Interface, minResources int) error {
	opts := tlisp.Options{File: render.BundledFile(name)}
	decls, _ := tlisp.DeclaredInputs(src, opts)
	forms, _ := tlisp.Parse(src, opts)
	var form *tlisp.Node
	for _, f := range forms {
		if f.Head() == "deflava-architecture" {
			form = f
			break
		}
	}

	fmt.Fprintf(w, "Name:       %s\n", name)
	if iface != nil && iface.Doc != "" {
		fmt.Fprintf(w, "About:      %s\n", iface.Doc)
	}
	fmt.Fprintf(w, "Resources:  %d with the defaults\n", minResources)
	if dirs := catalog.ModuleDirs(name); len(dirs) > 0 {
		fmt.Fprintf(w, "Modules:    %s (bundled in the rendered document)\n", strings.Join(dirs, ", "))
	}
	if err := writeInputs(w, decls, iface); err != nil {
		return err
	}
	if form != nil {
		writeClauses(w, clauseValues(form))
	}
	return writeInterface(w, iface)
}

// writeInputs writes the Inputs section: one row per declared input (with the interface's
// type, whether the gate requires it, the architecture's default and the description), then
// the inputs only the interface declares.
func writeInputs(w io.Writer, decls []tlisp.InputDecl, iface *arch.Interface) error {
	fmt.Fprintln(w, "\nInputs:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tTYPE\tREQUIRED\tDEFAULT\tDESCRIPTION")
	seen := map[string]bool{}
	row := func(n, typ, req, def, doc string) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", n, typ, req, def, doc)
	}
	for _, d := range decls {
		seen[d.Name] = true
		typ, req, doc := "-", "no", ""
		if iface != nil {
			if f, ok := iface.Input(d.Name); ok {
				typ, req, doc = typeString(f.Type), yesNo(f.Required && f.Default == nil), deref(f.Doc)
			} else {
				typ = "(not in interface)"
			}
		}
		def := "(none: must be bound)"
		if d.Default != nil {
			def = defaultString(d.Default)
		}
		row(d.Name, typ, req, def, doc)
	}
	if iface != nil {
		for _, f := range iface.Inputs {
			if !seen[f.Name] {
				def := "-"
				if f.Default != nil {
					def = strconv.Quote(*f.Default)
				}
				row(f.Name, typeString(f.Type), yesNo(f.Required && f.Default == nil), def, "(interface only) "+deref(f.Doc))
			}
		}
	}
	return tw.Flush()
}

// writeClauses writes the sections of a deflava-architecture form's clause values (by
// keyword): Resources, Data sources, Outputs (rendered), or the Result of an architecture
// without outputs.
func writeClauses(w io.Writer, vals map[string]*tlisp.Node) {
	fmt.Fprintln(w, "\nResources:")
	writeResources(w, vals["resources"], "  ")
	if d := vals["data"]; d != nil {
		fmt.Fprintln(w, "\nData sources:")
		writeResources(w, d, "  ")
	}
	if o := vals["outputs"]; o != nil && o.Kind == tlisp.NodeList {
		fmt.Fprintln(w, "\nOutputs (rendered):")
		for i := 0; i+1 < len(o.List); i += 2 {
			fmt.Fprintf(w, "  %s = %s\n", o.List[i].Text, o.List[i+1])
		}
	}
	if r := vals["result"]; r != nil && vals["outputs"] == nil && r.Kind == tlisp.NodeList {
		fmt.Fprintln(w, "\nResult (consumer contract, not rendered):")
		for i := 0; i+1 < len(r.List); i += 2 {
			fmt.Fprintf(w, "  %s\n", r.List[i].Text)
		}
	}
}

// writeInterface writes the Interface section: the interface's name, whether it is closed or
// open (a loose input admits any binding) and its outputs; "(none)" without an interface.
func writeInterface(w io.Writer, iface *arch.Interface) error {
	fmt.Fprintln(w, "\nInterface:")
	if iface == nil {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	mode := "closed: with spec.gate (or --gate) naming it, a binding it does not declare is rejected"
	for _, f := range iface.Inputs {
		if f.Loose || f.Type.IsLoose() {
			mode = fmt.Sprintf("open: loose input `%s` admits any other binding", f.Name)
			break
		}
	}
	fmt.Fprintf(w, "  %s, %s\n", iface.Name, mode)
	if len(iface.Outputs) > 0 {
		fmt.Fprintln(w, "  outputs:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range iface.Outputs {
			if doc := deref(f.Doc); doc != "" {
				fmt.Fprintf(tw, "    %s\t%s\t%s\n", f.Name, typeString(f.Type), doc)
			} else {
				fmt.Fprintf(tw, "    %s\t%s\n", f.Name, typeString(f.Type))
			}
		}
		return tw.Flush()
	}
	return nil
}

// clauseValues returns a deflava-architecture form's clause values by keyword.
func clauseValues(form *tlisp.Node) map[string]*tlisp.Node {
	out := map[string]*tlisp.Node{}
	for i := 2; i+1 < len(form.List); i += 2 {
		if k := form.List[i]; k.Kind == tlisp.NodeKeyword {
			out[k.Text] = form.List[i+1]
		}
	}
	return out
}

// writeResources lists resource forms as "type "name-template"", descending into for-each.
func writeResources(w io.Writer, list *tlisp.Node, indent string) {
	if list == nil || list.Kind != tlisp.NodeList {
		return
	}
	for _, r := range list.List {
		if r.Kind != tlisp.NodeList || len(r.List) == 0 {
			continue
		}
		head := r.List[0]
		switch {
		case head.IsSymbol("for-each") && len(r.List) >= 3:
			src := "?"
			if b := r.List[1]; b.Kind == tlisp.NodeList && len(b.List) >= 2 {
				if it := b.List[1]; it.Kind == tlisp.NodeList && len(it.List) >= 2 {
					src = it.List[1].Text
				}
			}
			fmt.Fprintf(w, "%sfor each item of %s:\n", indent, src)
			writeResources(w, &tlisp.Node{Kind: tlisp.NodeList, List: r.List[2:]}, indent+"  ")
		case head.IsSymbol("import"):
			fmt.Fprintf(w, "%simport %s\n", indent, strings.TrimPrefix(r.String(), "(import "))
		case head.Kind == tlisp.NodeSymbol:
			name := "?"
			if len(r.List) > 1 {
				name = r.List[1].String()
			}
			var meta []string
			for i := 2; i+1 < len(r.List); i += 2 {
				if k := r.List[i]; k.Kind == tlisp.NodeKeyword && (k.Text == "when" || k.Text == "count" || k.Text == "for-each") {
					meta = append(meta, ":"+k.Text+" "+r.List[i+1].String())
				}
			}
			line := indent + strings.ReplaceAll(head.Text, "-", "_") + " " + name
			if len(meta) > 0 {
				line += "  (" + strings.Join(meta, ", ") + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
}

// typeString renders a field type in the interface grammar ("(:list-of :availability-zone
// :min-items 1)").
func typeString(t arch.Type) string {
	switch t.Kind {
	case arch.TypeListOf:
		elem := ":any"
		if t.Elem != nil {
			elem = typeString(*t.Elem)
		}
		s := "(:list-of " + elem
		if t.MinItems != nil {
			s += " :min-items " + strconv.Itoa(*t.MinItems)
		}
		if t.MaxItems != nil {
			s += " :max-items " + strconv.Itoa(*t.MaxItems)
		}
		return s + ")"
	case arch.TypeEnum:
		qs := make([]string, len(t.Enum))
		for i, v := range t.Enum {
			qs[i] = strconv.Quote(v)
		}
		return "(:enum " + strings.Join(qs, " ") + ")"
	case arch.TypeIntRange, arch.TypePortRange:
		return fmt.Sprintf("(:%s :lo %d :hi %d)", t.Kind, t.Lo, t.Hi)
	case arch.TypeLength:
		s := "(:length"
		if t.MinLen != nil {
			s += " :min " + strconv.Itoa(*t.MinLen)
		}
		if t.MaxLen != nil {
			s += " :max " + strconv.Itoa(*t.MaxLen)
		}
		return s + ")"
	case arch.TypePattern:
		m := t.Match
		if m == "" {
			m = "contains"
		}
		return fmt.Sprintf("(:pattern :source %q :match-kind %s)", t.Pattern, m)
	default:
		return ":" + t.Kind.String()
	}
}

func defaultString(d *tlisp.InputDefault) string {
	if !d.IsList {
		return strconv.Quote(d.Scalar)
	}
	qs := make([]string, len(d.Items))
	for i, v := range d.Items {
		qs[i] = strconv.Quote(v)
	}
	return "(" + strings.Join(qs, " ") + ")"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
