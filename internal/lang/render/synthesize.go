package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/bundle"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/gate"
	"github.com/lava-operator/lava/internal/lang/hclnest"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/scrub"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// Source kinds of [Input.SourceKind], as in a LavaArchitecture's spec.source and a RenderRecord.
const (
	SourceInline = "inline"
	SourceName   = "name"
	SourceFile   = "file"
)

// Input is everything one synthesis needs. It is what the CLI reads from a file or manifest and
// what the synth service reads from a LavaArchitecture and its ConfigMaps and Secrets.
type Input struct {
	// SourceKind is SourceInline, SourceName (a bundled architecture) or SourceFile.
	SourceKind string
	// SourceName is the bundled architecture's name for SourceName, the file's path for
	// SourceFile (recorded, never read), and ignored for SourceInline.
	SourceName string
	// SourceText is the .tlisp text for SourceInline and SourceFile; ignored for SourceName.
	SourceText []byte
	// File is the name positions in SourceText carry ("" leaves it out). For SourceName it is
	// ignored: positions name "bundled/NAME.tlisp".
	File string
	// MapPos, when set, maps every position that points into SourceText (reader, evaluator and
	// CheckArchitecture diagnostics), for example from an inline source back into the manifest
	// that holds it. Positions of BindingPos and GatePos are not mapped.
	MapPos func(arch.Pos) arch.Pos
	// Bindings are the input values (scalar, list and record-list bindings).
	Bindings tlisp.Bindings
	// SecretKeys names the bindings whose values come from Secrets: the RenderRecord's
	// bindingsDigest covers them only through a BLAKE3 keyed with BindingsKey.
	SecretKeys []string
	// BindingsKey is the installation's 32-byte key for secret values in bindingsDigest.
	BindingsKey []byte
	// Gate names a bundled interface to validate Bindings against before evaluation ("" for
	// none).
	Gate string
	// BindingPos optionally gives the position of each binding (a manifest's key) for gate
	// diagnostics; GatePos the position of the gate's name; SourcePos the position of the
	// source (a manifest's spec.source.name), for an unknown bundled name. None is mapped.
	BindingPos map[string]arch.Pos
	GatePos    arch.Pos
	SourcePos  arch.Pos
}

// Output is a successful synthesis.
type Output struct {
	Architecture *arch.Architecture
	// JSON is the pretty Terraform JSON (2-space indent, trailing newline); Compact the same
	// value on one line without a trailing newline.
	JSON    []byte
	Compact []byte
	Record  RenderRecord
	// Warnings are the warning diagnostics (also returned as diagnostics).
	Warnings tlisp.Diagnostics
}

// BundledFile is the file name positions in a bundled architecture carry.
func BundledFile(name string) string { return catalog.File(name) }

// Synthesize runs the pipeline: resolve the source (a bundled name through the catalog), run the
// gate (before evaluation: the bindings against the named bundled interface, and the interface
// against the architecture's :inputs, see [gate.CheckArchitecture]), evaluate, render pretty and
// compact Terraform JSON and fill the RenderRecord.
//
// It returns every diagnostic, warnings included (among them each binding the architecture does
// not declare); the Output is nil when any diagnostic is an error. A gate rejection is one error
// with upstream's summary ("interface `IFACE` rejected COUNT field(s): FIRST") at GatePos,
// followed by one error per field at the binding's position; evaluation does not run then.
// An unknown bundled name or gate is an error (`unknown bundled architecture "NAME"`,
// `unknown bundled interface "NAME"`).
//
// No diagnostic carries the value of a binding named in SecretKeys: each such value is replaced
// by "<redacted>" in every message (a value shorter than 4 bytes only where it stands quoted,
// in backticks or after "value ", so short secrets do not mangle the text). The catalog's own
// ":result is not rendered" warnings are dropped for a bundled source (the user cannot act on
// them). A panic inside the pipeline becomes an error diagnostic; it never reaches the caller.
func Synthesize(in Input) (out *Output, diags tlisp.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			diags = redactSecrets(append(diags, tlisp.Diagnostic{Severity: tlisp.SeverityError,
				Message: fmt.Sprintf("internal error in synthesis: %v", r)}), in)
		}
	}()
	out, diags = synthesize(in)
	diags = redactSecrets(diags, in)
	if out != nil {
		out.Warnings = diags.Warnings()
	}
	return out, diags
}

// synthesis is the state of one [synthesize] run, which its ordered steps share.
type synthesis struct {
	in    Input
	diags tlisp.Diagnostics
	// src and file are the resolved source text and the file its positions name.
	src  []byte
	file string
	// iface is the bundled interface of in.Gate (nil without a gate).
	iface *arch.Interface
	// secret is the set of in.SecretKeys.
	secret map[string]bool
	opts   tlisp.Options
	// arch is the evaluated architecture.
	arch *arch.Architecture
}

// synthesize runs the steps of [Synthesize] in order, stopping after the first that reports
// an error, and renders the architecture when none did.
func synthesize(in Input) (*Output, tlisp.Diagnostics) {
	s := &synthesis{in: in}
	for _, step := range []func() bool{s.resolve, s.gate, s.evaluate, s.bundleModules} {
		if !step() {
			return nil, s.diags
		}
	}
	return s.render()
}

// errorf adds an error diagnostic at p.
func (s *synthesis) errorf(p arch.Pos, format string, args ...any) {
	s.diags = append(s.diags, tlisp.Diagnostic{Pos: p, Severity: tlisp.SeverityError, Message: fmt.Sprintf(format, args...)})
}

// srcDiags maps the positions of diagnostics about the source text with in.MapPos (when set);
// a bundled source's positions stay as they are.
func (s *synthesis) srcDiags(ds tlisp.Diagnostics) tlisp.Diagnostics {
	if s.in.SourceKind == SourceName || s.in.MapPos == nil {
		return ds
	}
	for i := range ds {
		ds[i].Pos = s.in.MapPos(ds[i].Pos)
	}
	return ds
}

// resolve finds the source text (a bundled architecture's for SourceName) and the gate's
// bundled interface, and sets up the evaluation options.
func (s *synthesis) resolve() bool {
	in := s.in
	s.src, s.file = in.SourceText, in.File
	switch in.SourceKind {
	case SourceInline, SourceFile:
	case SourceName:
		if e, ok := catalog.Get(in.SourceName); ok {
			s.src, s.file = e.Source, BundledFile(in.SourceName)
		} else {
			s.errorf(in.SourcePos, "unknown bundled architecture %q", in.SourceName)
		}
	default:
		s.errorf(arch.Pos{}, "unknown source kind %q (want %s, %s or %s)", in.SourceKind, SourceInline, SourceName, SourceFile)
	}
	if in.Gate != "" {
		if e, ok := catalog.Get(in.Gate); ok && e.Interface != nil {
			s.iface = e.Interface
		} else {
			s.errorf(in.GatePos, "unknown bundled interface %q", in.Gate)
		}
	}
	if s.diags.HasErrors() {
		return false
	}
	s.secret = make(map[string]bool, len(in.SecretKeys))
	for _, k := range in.SecretKeys {
		s.secret[k] = true
	}
	s.opts = tlisp.Options{File: s.file, SecretInputs: s.secret, TemplateSequences: TemplateSequences}
	return true
}

// gate validates the bindings against the gate's interface (one error with the summary at
// GatePos, then one per field at the binding's position) and the interface against the
// architecture's declared :inputs ([gate.CheckArchitecture]). Without a gate it does nothing.
func (s *synthesis) gate() bool {
	if s.iface == nil {
		return true
	}
	in := s.in
	decls, ds := tlisp.DeclaredInputs(s.src, s.opts)
	s.diags = append(s.diags, s.srcDiags(ds.Errors())...)
	if s.diags.HasErrors() {
		return false
	}
	res := gate.Validate(s.iface, gate.Bag{Scalars: in.Bindings.Scalars, Lists: in.Bindings.Lists, Records: in.Bindings.Records})
	if err := res.Err(); err != nil {
		s.errorf(in.GatePos, "%s", err)
		for i, fe := range res.Errors {
			// One error per field, as many as the evaluator reports at most: a binding of
			// 10,000 Secret keys through a closed interface is 10,000 field errors.
			if i == tlisp.MaxDiagnostics {
				s.errorf(in.GatePos, "… and %d more field error(s) of interface `%s`", len(res.Errors)-i, s.iface.Name)
				break
			}
			p := in.GatePos
			if name := fieldName(fe); name != "" {
				if bp, ok := in.BindingPos[name]; ok {
					p = bp
				}
			}
			s.errorf(p, "%s", fe)
		}
	}
	inputs := make([]gate.ArchInput, 0, len(decls))
	for _, d := range decls {
		inputs = append(inputs, gate.ArchInput{Name: d.Name, HasDefault: d.Default != nil, Pos: d.Pos})
	}
	for _, f := range gate.CheckArchitecture(s.iface, inputs) {
		p := in.GatePos
		if f.Pos.IsValid() {
			p = s.srcDiags(tlisp.Diagnostics{{Pos: f.Pos}})[0].Pos
		}
		sev := tlisp.SeverityWarning
		if f.Severity == gate.SeverityError {
			sev = tlisp.SeverityError
		}
		s.diags = append(s.diags, tlisp.Diagnostic{Pos: p, Severity: sev, Message: f.Message})
	}
	return !s.diags.HasErrors()
}

// evaluate evaluates the source with the escaped bindings.
func (s *synthesis) evaluate() bool {
	// Bindings are data: every value is escaped before it is interpolated, so the engine
	// applies its literal text, a Secret's value marked sensitive (see [EscapeBindings]). The
	// gate above and the bindingsDigest below see the values as given.
	a, ds := tlisp.EvalArchitecture(s.src, EscapeBindings(s.in.Bindings, s.secret), s.opts)
	if s.in.SourceKind == SourceName {
		ds = dropBundledResultWarnings(ds)
	}
	s.diags = append(s.diags, s.srcDiags(ds)...)
	s.arch = a
	return a != nil && !s.diags.HasErrors()
}

// bundleModules sets the architecture's Bundle to the module directories its local :modules
// sources name and reports each call it cannot satisfy ([moduleBundle]).
func (s *synthesis) bundleModules() bool {
	if len(s.arch.Modules) == 0 {
		return true
	}
	for _, d := range moduleBundle(s.in, s.arch) {
		s.diags = append(s.diags, s.srcDiags(tlisp.Diagnostics{d})...)
	}
	return !s.diags.HasErrors()
}

// render renders the pretty and compact Terraform JSON and fills the RenderRecord.
func (s *synthesis) render() (*Output, tlisp.Diagnostics) {
	a := s.arch
	pretty, compact, err := Render(a)
	if err != nil {
		s.errorf(arch.Pos{}, "render terraform.json: %v", err)
		return nil, s.diags
	}
	if err := hclnest.SequencesError(compact); err != nil {
		s.errorf(a.Pos, "render terraform.json: %v", err)
		return nil, s.diags
	}
	if ds := s.srcDiags(checkReferences(a, compact)); len(ds) > 0 {
		s.diags = append(s.diags, ds...)
		return nil, s.diags
	}
	rec, err := newRecord(s.in, s.src, a, compact)
	if err != nil {
		s.errorf(arch.Pos{}, "render record: %v", err)
		return nil, s.diags
	}
	return &Output{Architecture: a, JSON: pretty, Compact: compact, Record: rec, Warnings: s.diags.Warnings()}, s.diags
}

// fieldName returns the input a gate field error is about.
func fieldName(err error) string {
	switch e := err.(type) {
	case *gate.MissingRequired:
		return e.Name
	case *gate.UnknownField:
		return e.Name
	case *gate.TypeMismatch:
		return e.Name
	}
	return ""
}

// newRecord fills the RenderRecord of a successful synthesis.
func newRecord(in Input, src []byte, a *arch.Architecture, compact []byte) (RenderRecord, error) {
	secret := make(map[string]bool, len(in.SecretKeys))
	for _, k := range in.SecretKeys {
		secret[k] = true
	}
	bd, err := BindingsDigest(in.Bindings, secret, in.BindingsKey)
	if err != nil {
		return RenderRecord{}, err
	}
	jd, err := DigestJSON(compact)
	if err != nil {
		return RenderRecord{}, err
	}
	if len(secret) > 0 {
		// The JSON holds the secret values: a plain digest would let anyone who reads the
		// record test guesses offline. Keyed like the secret values of bindingsDigest.
		if jd, err = KeyedJSONDigest(compact, in.BindingsKey); err != nil {
			return RenderRecord{}, err
		}
	}
	return RenderRecord{
		SourceKind:          in.SourceKind,
		SourceDigest:        SourceDigest(string(src)),
		BindingsDigest:      bd,
		Gate:                in.Gate,
		ArchitectureName:    a.Name,
		ResourceCount:       len(a.Resources),
		TerraformJSONDigest: jd,
		EvaluatorVersion:    tlisp.EvaluatorVersion,
	}, nil
}

// dropBundledResultWarnings removes the ":result is not rendered" warnings of a bundled
// architecture: most of the catalog declares only :result, as upstream's files do, by design,
// and the user rendering it cannot act on the warning.
func dropBundledResultWarnings(ds tlisp.Diagnostics) tlisp.Diagnostics {
	out := ds[:0:0]
	for _, d := range ds {
		if d.Severity == tlisp.SeverityWarning && strings.HasPrefix(d.Message, ":result is not rendered") {
			continue
		}
		out = append(out, d)
	}
	return out
}

// redactSecrets removes the values of secret bindings from every diagnostic message, in one
// pass over each message whatever the number of values ([scrub.Set]).
func redactSecrets(ds tlisp.Diagnostics, in Input) tlisp.Diagnostics {
	if len(ds) == 0 || len(in.SecretKeys) == 0 {
		return ds
	}
	var values []string
	for _, k := range in.SecretKeys {
		if v, ok := in.Bindings.Scalars[k]; ok {
			values = append(values, v)
		}
		values = append(values, in.Bindings.Lists[k]...)
		for _, row := range in.Bindings.Records[k] {
			for _, v := range row {
				values = append(values, v)
			}
		}
		if l, ok := in.Bindings.Lists[k]; ok {
			values = append(values, strings.Join(l, ","))
		}
	}
	// The evaluator sees the escaped values (see [EscapeBindings]): redact those forms too.
	for _, v := range values {
		if e := EscapeTemplate(v); e != v {
			values = append(values, e)
		}
		values = append(values, SensitiveTemplate(v))
	}
	set := scrub.New(redactPatterns(values)...)
	for i := range ds {
		ds[i].Message = set.Replace(ds[i].Message, redacted)
	}
	return ds
}

const redacted = "<redacted>"

// redactPatterns returns what hides each value in a message: a value of 4 bytes or more
// wherever it stands, as is and as the body of its Go quoting; a shorter one only where it
// stands quoted, in backticks or after "value ", so short secrets do not mangle the text (the
// quotes and words stay). Every byte any of them covers is hidden, so a value that contains or
// overlaps another is hidden whole.
func redactPatterns(values []string) []scrub.Pattern {
	var ps []scrub.Pattern
	for _, v := range values {
		if v == "" {
			continue
		}
		quoted := strconv.Quote(v)
		if len(v) >= 4 {
			ps = append(ps, scrub.Pattern{Text: v}, scrub.Pattern{Text: quoted[1 : len(quoted)-1]})
			continue
		}
		for _, form := range []string{quoted, "`" + v + "`", "'" + v + "'"} {
			ps = append(ps, scrub.Pattern{Text: form, Lead: 1, Trail: 1})
		}
		ps = append(ps, scrub.Pattern{Text: "value " + v + " ", Lead: len("value "), Trail: 1})
	}
	return ps
}

// CheckPolicy applies the tenant policy gate ([policy.Check]) to a successful synthesis of in
// and returns its violations as error diagnostics, positions mapped like the evaluator's
// (Input.MapPos for an inline or file source) and secret values redacted. Nil means out
// passes. The synth service reports a non-empty result as Failed with reason PolicyRejected;
// `lava validate` prints it.
func CheckPolicy(in Input, out *Output, p policy.Policy) tlisp.Diagnostics {
	if out == nil {
		return nil
	}
	var ds tlisp.Diagnostics
	for _, v := range policy.Check(out.Architecture, out.Compact, p) {
		pos := v.Pos
		if in.MapPos != nil && in.SourceKind != SourceName && pos.IsValid() {
			pos = in.MapPos(pos)
		}
		ds = append(ds, tlisp.Diagnostic{Pos: pos, Severity: tlisp.SeverityError, Message: v.Message})
	}
	return redactSecrets(ds, in)
}

// moduleBundle sets a.Bundle to the module directories a's local module sources name,
// transitively (catalog.ModuleBundle), and returns an error diagnostic at the module form for
// each call it cannot satisfy. Only a bundled architecture (SourceName) ships module
// directories: a local source in an inline or file source names nothing the architecture owns
// (it would be a directory of Lava's applier) and is refused. Remote sources are left to the
// tenant policy.
func moduleBundle(in Input, a *arch.Architecture) tlisp.Diagnostics {
	var ds tlisp.Diagnostics
	errorf := func(p arch.Pos, format string, args ...any) {
		ds = append(ds, tlisp.Diagnostic{Pos: p, Severity: tlisp.SeverityError, Message: fmt.Sprintf(format, args...)})
	}
	bundled := map[string]bool{}
	var dirs []string
	for i := range a.Modules {
		m := &a.Modules[i]
		if !bundle.IsLocal(m.Source) {
			continue
		}
		if in.SourceKind != SourceName {
			kind := "an inline source"
			if in.SourceKind == SourceFile {
				kind = "a file source"
			}
			errorf(m.Pos, "module %s: the local source %q names a module directory, but %s has no bundle: only a bundled architecture of the catalog ships module directories (docs/design/0017-modules-and-bundled-sources.md)",
				m.Name, m.Source, kind)
			continue
		}
		dir, err := bundle.Resolve("", m.Source)
		if err != nil {
			errorf(m.Pos, "module %s: %v", m.Name, err)
			continue
		}
		// Each call's directories are read on their own, so an error names the call.
		mods, err := catalog.ModuleBundle(in.SourceName, []string{dir})
		if err != nil {
			errorf(m.Pos, "module %s: %v", m.Name, err)
			continue
		}
		for d := range mods {
			if !bundled[d] {
				bundled[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	if len(ds) > 0 || len(dirs) == 0 {
		return ds
	}
	mods, err := catalog.ModuleBundle(in.SourceName, dirs)
	if err != nil {
		errorf(a.Pos, "%v", err)
		return ds
	}
	a.Bundle = mods
	return ds
}
