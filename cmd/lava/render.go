package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/up"
)

// bindingFlags are the binding and gate flags shared by render and validate.
type bindingFlags struct {
	set       []string
	setList   []string
	record    []string
	gate      string
	noGate    bool
	policy    string
	namespace string
}

func (f *bindingFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.set, "set", nil, "bind input `KEY=VALUE` (a scalar; repeatable)")
	fs.StringArrayVar(&f.setList, "set-list", nil, "bind input `KEY=A,B,...` to a list split on commas (KEY= is the empty list; repeatable)")
	fs.StringArrayVar(&f.record, "record", nil, "add rows to record-list input `KEY=JSON`: a JSON object of strings is one row, an array of them several (repeatable; rows accumulate)")
	fs.StringVar(&f.gate, "gate", "", "validate the bindings against bundled interface `NAME` before evaluating (overrides spec.gate)")
	fs.BoolVar(&f.noGate, "no-gate", false, "do not apply any gate, not even the manifest's spec.gate")
	fs.StringVar(&f.namespace, "namespace", "default", "check a .tlisp source against the tenant policy of namespace `NS` (a manifest's own metadata.namespace wins): under lava up's built-in policy, its files may be written only under "+up.DemoDir+"/NS")
	fs.StringVar(&f.policy, "policy", "", "check every render against the tenant policy document `FILE` as synth does (default: lava up's, the built-in policy with each namespace's files under "+up.DemoDir+"/NAMESPACE; docs/design/0010-tenant-policy.md)")
}

// overrides are parsed binding flags: each key replaces the same key of every binding map of
// a manifest.
type overrides struct {
	bindings  tlisp.Bindings
	keys      map[string]bool
	gate      string
	noGate    bool
	policy    policy.Config
	namespace string // the namespace a .tlisp source is checked in
}

// parse checks the flags' syntax; an error is a usage error (exit code 2).
func (f *bindingFlags) parse() (overrides, error) {
	o := overrides{
		bindings:  tlisp.Bindings{Scalars: map[string]string{}, Lists: map[string][]string{}, Records: map[string][]map[string]string{}},
		keys:      map[string]bool{},
		gate:      f.gate,
		noGate:    f.noGate,
		namespace: f.namespace,
	}
	if f.noGate && f.gate != "" {
		return o, errors.New("--gate and --no-gate are mutually exclusive")
	}
	pol, err := policy.ReadFile(f.policy)
	if err != nil {
		return o, fmt.Errorf("--policy: %w", err)
	}
	if f.policy == "" {
		pol = up.DefaultPolicy() // what lava up checks against
	}
	o.policy = pol
	split := func(flag, kv string) (string, string, error) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", "", fmt.Errorf("--%s %q: want KEY=VALUE", flag, kv)
		}
		return k, v, nil
	}
	for _, kv := range f.set {
		k, v, err := split("set", kv)
		if err != nil {
			return o, err
		}
		o.bindings.Scalars[k], o.keys[k] = v, true
	}
	for _, kv := range f.setList {
		k, v, err := split("set-list", kv)
		if err != nil {
			return o, err
		}
		items := []string{}
		if v != "" {
			items = strings.Split(v, ",")
		}
		o.bindings.Lists[k], o.keys[k] = items, true
	}
	for _, kv := range f.record {
		k, v, err := split("record", kv)
		if err != nil {
			return o, err
		}
		rows, err := parseRecords(v)
		if err != nil {
			return o, fmt.Errorf("--record %s: %w", k, err)
		}
		if _, ok := o.bindings.Records[k]; !ok {
			o.bindings.Records[k] = []map[string]string{}
		}
		o.bindings.Records[k], o.keys[k] = append(o.bindings.Records[k], rows...), true
	}
	return o, nil
}

// parseRecords reads a JSON object of strings (one row) or an array of such objects.
func parseRecords(v string) ([]map[string]string, error) {
	trimmed := strings.TrimSpace(v)
	var rows []map[string]string
	if strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal([]byte(trimmed), &rows); err != nil {
			return nil, fmt.Errorf("want a JSON array of objects with string values: %w", err)
		}
		return rows, nil
	}
	var row map[string]string
	if err := json.Unmarshal([]byte(trimmed), &row); err != nil || row == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("want a JSON object with string values (or an array of them): %w", err)
	}
	return []map[string]string{row}, nil
}

// apply merges the overrides into a unit's bindings and gate.
func (o overrides) apply(u *unit) {
	b := tlisp.Bindings{Scalars: map[string]string{}, Lists: map[string][]string{}, Records: map[string][]map[string]string{}}
	for k, v := range u.Bindings.Scalars {
		if !o.keys[k] {
			b.Scalars[k] = v
		}
	}
	for k, v := range u.Bindings.Lists {
		if !o.keys[k] {
			b.Lists[k] = v
		}
	}
	for k, v := range u.Bindings.Records {
		if !o.keys[k] {
			b.Records[k] = v
		}
	}
	for k := range o.keys {
		delete(u.BindingPos, k) // the value no longer comes from the manifest
	}
	for k, v := range o.bindings.Scalars {
		b.Scalars[k] = v
	}
	for k, v := range o.bindings.Lists {
		b.Lists[k] = v
	}
	for k, v := range o.bindings.Records {
		b.Records[k] = v
	}
	u.Bindings = b
	switch {
	case o.noGate:
		u.Gate = ""
	case o.gate != "":
		u.Gate = o.gate
		u.GatePos = arch.Pos{} // the flag has no position in the file
	}
}

const renderLong = `Render prints the Terraform JSON of an architecture on stdout.

FILE is a .tlisp source or a LavaArchitecture manifest (YAML; "-" or no FILE reads standard
input, which is taken as .tlisp when its first significant character is "("). A manifest's
spec.source (inline or a bundled name), spec.bindings, spec.listBindings, spec.recordBindings
and spec.gate are honoured; --set, --set-list and --record replace the manifest's binding of
the same key (whatever its kind), --gate replaces spec.gate and --no-gate drops it.
spec.bindingsFrom needs a cluster and is ignored with a warning; a Flux source (spec.sourceRef)
is read in the cluster: render the file at spec.path of your checkout instead.

A manifest with several documents renders every LavaArchitecture document, in order, with the
same flags: each document's JSON is one value on stdout, so the output is a stream of JSON
values (one per line with -o compact) that jq reads; documents of other kinds are skipped with
a warning. Nothing is printed on stdout unless every document renders.

Warnings go to stderr as "file:line:col: warning: message"; errors as
"file:line:col: error: message" with the source line, and the exit code is 1. Positions inside
an inline source point into the manifest file.`

const renderExample = `  lava render examples/cloud/prod-vpc.yaml
  lava render -o compact examples/cloud/prod-vpc.yaml
  lava render net.tlisp --set name=preview --set-list availability-zones=us-west-2a,us-west-2b
  lava render repos.tlisp --record 'repos=[{"slug":"api","description":"API"}]'
  cat net.tlisp | lava render --gate aws-vpc-network -`

func newRenderCmd() *cobra.Command {
	var flags bindingFlags
	var output string
	cmd := &cobra.Command{
		Use:     "render [FILE]",
		Short:   "Print the Terraform JSON of a .tlisp file or LavaArchitecture manifest",
		Long:    renderLong,
		Example: renderExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "json" && output != "compact" {
				return fmt.Errorf("-o %q: want json or compact", output)
			}
			o, err := flags.parse()
			if err != nil {
				return err
			}
			path := "-"
			if len(args) == 1 {
				path = args[0]
			}
			stderr := cmd.ErrOrStderr()
			srcs := sources{}
			units, diags, err := readUnits(cmd.InOrStdin(), path, srcs)
			if err != nil {
				return invalidInput(err)
			}
			var outs [][]byte
			failed := diags.HasErrors()
			for i := range units {
				o.apply(&units[i])
				out, ds := synthesizeUnit(units[i], srcs, o.policy, o.namespace)
				diags = append(diags, ds...)
				if out == nil {
					failed = true
					continue
				}
				if output == "compact" {
					outs = append(outs, append(bytes.Clone(out.Compact), '\n'))
				} else {
					outs = append(outs, out.JSON)
				}
			}
			for _, d := range diags {
				writeDiag(stderr, d, displayName(path), srcs, d.Severity == tlisp.SeverityError)
			}
			if failed {
				return invalidInputPrinted(fmt.Errorf("%s: %d error(s)", displayName(path), len(diags.Errors())))
			}
			w := cmd.OutOrStdout()
			for _, b := range outs {
				if _, err := w.Write(b); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
			}
			return nil
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output `FORMAT`: json (pretty, 2-space indent) or compact (one line)")
	return cmd
}

// displayName is the name a path gets in messages ("<stdin>" for "-").
func displayName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}

// readUnits reads path ("-" for stdin) into units, recording its text in srcs. An unreadable
// file is an error; problems in its content are diagnostics.
func readUnits(stdin io.Reader, path string, srcs sources) ([]unit, tlisp.Diagnostics, error) {
	name := displayName(path)
	data, err := readInput(stdin, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && isCatalogName(path) {
			return nil, nil, fmt.Errorf("%w (%s is a bundled architecture: render it through a manifest whose spec.source.name is %s, or print it with `lava catalog show %s`)", err, path, path, path)
		}
		return nil, nil, err
	}
	srcs[name] = data
	units, diags := loadUnits(name, data)
	return units, diags, nil
}

// readInput reads path ("-" for stdin) whole, at most maxInputBytes. Errors: "read NAME: "
// and the read's error, or the size.
func readInput(stdin io.Reader, path string) ([]byte, error) {
	name := displayName(path)
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, maxInputBytes+1))
	} else {
		data, err = readFileLimited(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", name, maxInputBytes)
	}
	return data, nil
}

// isCatalogName reports whether arg names a bundled architecture of the catalog.
func isCatalogName(arg string) bool {
	_, ok := catalog.Get(arg)
	return ok
}

// maxInputBytes bounds what the CLI reads from one file (a manifest may hold several sources
// of up to 1 MiB each).
const maxInputBytes = 16 << 20

func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxInputBytes+1))
}

// synthesizeUnit runs the synthesis pipeline on one unit, then the tenant policy gate of the
// unit's namespace (render.CheckPolicy, as synth does; a .tlisp file is checked in namespace
// tlispNamespace); the unit's own manifest diagnostics come first. A bundled source's text is added
// to srcs so its diagnostics can be quoted. The Output is nil when any diagnostic is an error.
func synthesizeUnit(u unit, srcs sources, pol policy.Config, tlispNamespace string) (*render.Output, tlisp.Diagnostics) {
	diags := append(tlisp.Diagnostics(nil), u.Diags...)
	if diags.HasErrors() {
		return nil, diags
	}
	if u.SourceKind == render.SourceName {
		if text, ok := bundledSource(u.SourceName); ok {
			srcs[render.BundledFile(u.SourceName)] = text
		}
	}
	in := render.Input{
		SourceKind: u.SourceKind,
		SourceName: u.SourceName,
		SourceText: u.SourceText,
		File:       u.File,
		MapPos:     u.MapPos,
		Bindings:   u.Bindings,
		Gate:       u.Gate,
		BindingPos: u.BindingPos,
		GatePos:    u.GatePos,
		SourcePos:  u.SourcePos,
	}
	out, ds := render.Synthesize(in)
	diags = append(diags, ds...)
	namespace, _, _ := strings.Cut(u.Key, "/")
	if u.Key == "" {
		namespace = tlispNamespace
	}
	if pd := render.CheckPolicy(in, out, pol.For(namespace)); len(pd) > 0 {
		return nil, append(diags, pd...)
	}
	return out, diags
}
