package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/up"
)

// manifestKind and manifestGroup identify a LavaArchitecture document.
const (
	manifestKind  = "LavaArchitecture"
	manifestGroup = "lava.pleme.io/"
)

// lavaManifest is the part of a LavaArchitecture the CLI reads (field names as in the CRD).
type lavaManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Source struct {
			Inline string `json:"inline"`
			Name   string `json:"name"`
		} `json:"source"`
		SourceRef      *struct{ Kind, Name string }   `json:"sourceRef"`
		Path           string                         `json:"path"`
		Bindings       map[string]string              `json:"bindings"`
		ListBindings   map[string][]string            `json:"listBindings"`
		RecordBindings map[string][]map[string]string `json:"recordBindings"`
		BindingsFrom   []any                          `json:"bindingsFrom"`
		Gate           string                         `json:"gate"`
	} `json:"spec"`
}

// unit is one thing to synthesize: a .tlisp file, or one LavaArchitecture document of a manifest.
type unit struct {
	// File is the display name of the file ("<stdin>" for standard input).
	File string
	// Label names the unit in messages: the file, plus "#N (name)" for a manifest document.
	Label      string
	SourceKind string // "inline", "name" or "file"
	SourceName string
	SourceText []byte
	Bindings   tlisp.Bindings
	Gate       string
	// MapPos maps a position inside SourceText to the file (nil: identity).
	MapPos     func(arch.Pos) arch.Pos
	BindingPos map[string]arch.Pos
	GatePos    arch.Pos
	SourcePos  arch.Pos
	// Pos is where the document starts (the whole file for a .tlisp file).
	Pos arch.Pos
	// Diags are problems found while reading the manifest itself.
	Diags tlisp.Diagnostics
	// Key is a manifest document's "namespace/name" (namespace defaulted), KeyPos where its
	// metadata.name is; both empty for a .tlisp file.
	Key    string
	KeyPos arch.Pos
}

// isTlisp reports whether data read from name is a .tlisp source rather than a manifest: by
// extension (.tlisp; .yaml, .yml and .json are manifests), else by its first significant
// character (an opening parenthesis).
func isTlisp(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".tlisp":
		return true
	case ".yaml", ".yml", ".json":
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, ";") || strings.HasPrefix(t, "#") {
			continue
		}
		return strings.HasPrefix(t, "(")
	}
	return false
}

// loadUnits turns the content of one file into units: a single unit for a .tlisp source, one
// per LavaArchitecture document for a manifest. Documents of another kind are skipped with a
// warning; empty documents silently. A file with no LavaArchitecture at all is an error.
func loadUnits(name string, data []byte) ([]unit, tlisp.Diagnostics) {
	start := arch.Pos{File: name, Line: 1, Col: 1}
	if isTlisp(name, data) {
		return []unit{{File: name, Label: name, SourceKind: "file", SourceName: name, SourceText: data, Pos: start}}, nil
	}
	var units []unit
	var diags tlisp.Diagnostics
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p := start
			line, msg := up.YAMLError(err)
			if line > 0 {
				p = arch.Pos{File: name, Line: line, Col: 1}
			}
			diags = append(diags, diagnostic(p, tlisp.SeverityError, "invalid YAML: %s", msg))
			break
		}
		u, ds, ok := loadDocument(name, data, i, &doc)
		diags = append(diags, ds...)
		if ok {
			units = append(units, u)
		}
	}
	if len(units) == 0 && !diags.HasErrors() {
		diags = append(diags, diagnostic(start, tlisp.SeverityError,
			"no %s document found (a .tlisp file needs the .tlisp extension or must start with \"(\")", manifestKind))
	}
	return units, diags
}

// loadDocument reads one YAML document; ok is false when it is not a LavaArchitecture.
func loadDocument(name string, data []byte, index int, doc *yaml.Node) (unit, tlisp.Diagnostics, bool) {
	var diags tlisp.Diagnostics
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return unit{}, nil, false
		}
		root = root.Content[0]
	}
	docPos := nodePos(name, root)
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return unit{}, nil, false
	}
	if root.Kind != yaml.MappingNode {
		return unit{}, tlisp.Diagnostics{diagnostic(docPos, tlisp.SeverityError,
			"document %d is not a mapping: a LavaArchitecture manifest is expected", index+1)}, false
	}
	raw, err := yaml.Marshal(root)
	if err != nil {
		return unit{}, tlisp.Diagnostics{diagnostic(docPos, tlisp.SeverityError, "document %d: %v", index+1, err)}, false
	}
	var m lavaManifest
	if err := sigsyaml.Unmarshal(raw, &m); err != nil {
		return unit{}, tlisp.Diagnostics{diagnostic(docPos, tlisp.SeverityError,
			"document %d is not a valid %s: %s", index+1, manifestKind, strings.TrimPrefix(err.Error(), "error unmarshaling JSON: "))}, false
	}
	if m.Kind != manifestKind || !strings.HasPrefix(m.APIVersion, manifestGroup) {
		return unit{}, tlisp.Diagnostics{diagnostic(docPos, tlisp.SeverityWarning,
			"document %d (kind %q, apiVersion %q) is not a %s; skipped", index+1, m.Kind, m.APIVersion, manifestKind)}, false
	}
	// The CRD's admission rules, as lava up applies them: a document lava up would reject is
	// not synthesized.
	obj, _, errs := up.DecodeDocument(doc, index)
	if len(errs) > 0 {
		for _, e := range errs {
			diags = append(diags, diagnostic(arch.Pos{File: name, Line: e.Line, Col: e.Col}, tlisp.SeverityError, "%s", e.Msg))
		}
		return unit{}, diags, false
	}
	label := fmt.Sprintf("%s#%d", name, index+1)
	if m.Metadata.Name != "" {
		label += " (" + m.Metadata.Name + ")"
	}
	u := unit{
		File:  name,
		Label: label,
		Bindings: tlisp.Bindings{
			Scalars: m.Spec.Bindings,
			Lists:   m.Spec.ListBindings,
			Records: m.Spec.RecordBindings,
		},
		Gate:       m.Spec.Gate,
		Pos:        docPos,
		BindingPos: map[string]arch.Pos{},
		Key:        obj.Namespace + "/" + obj.Name,
		KeyPos:     nodePos(name, up.FieldNode(root, "metadata.name")),
	}
	spec := mapValue(root, "spec")
	source := mapValue(spec, "source")
	for _, field := range []string{"bindings", "listBindings", "recordBindings"} {
		if bs := mapValue(spec, field); bs != nil && bs.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(bs.Content); j += 2 {
				if _, seen := u.BindingPos[bs.Content[j].Value]; !seen {
					u.BindingPos[bs.Content[j].Value] = nodePos(name, bs.Content[j])
				}
			}
		}
	}
	if g := mapValue(spec, "gate"); g != nil {
		u.GatePos = nodePos(name, g)
	} else if spec != nil {
		u.GatePos = nodePos(name, spec)
	} else {
		u.GatePos = docPos
	}
	if len(m.Spec.BindingsFrom) > 0 {
		diags = append(diags, diagnostic(nodePos(name, mapKey(spec, "bindingsFrom")), tlisp.SeverityWarning,
			"spec.bindingsFrom is not read by the CLI (it needs the cluster's ConfigMaps and Secrets); use --set"))
	}
	src := m.Spec.Source
	kinds := 0
	for _, s := range []string{src.Inline, src.Name} {
		if s != "" {
			kinds++
		}
	}
	if m.Spec.SourceRef != nil {
		kinds++
	}
	srcPos := docPos
	if source != nil {
		srcPos = nodePos(name, source)
	}
	switch {
	case kinds != 1:
		diags = append(diags, diagnostic(srcPos, tlisp.SeverityError,
			"exactly one of spec.source.inline, spec.source.name and spec.sourceRef must be set (%d set)", kinds))
	case src.Inline != "":
		u.SourceKind = "inline"
		u.SourceText = []byte(src.Inline)
		u.MapPos = up.InlineMapper(name, data, mapValue(source, "inline"))
	case src.Name != "":
		u.SourceKind = "name"
		u.SourceName = src.Name
		u.SourcePos = nodePos(name, mapValue(source, "name"))
	default:
		diags = append(diags, diagnostic(nodePos(name, mapKey(spec, "sourceRef")), tlisp.SeverityError,
			"spec.sourceRef (a Flux source) is read in the cluster, not by the CLI; render the file at %s of your checkout with `lava render PATH`", m.Spec.Path))
	}
	u.Diags = diags
	return u, nil, true
}

// mapKey returns the key node of key in a mapping node, or nil.
func mapKey(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

// mapValue returns the value node of key in a mapping node, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func nodePos(file string, n *yaml.Node) arch.Pos {
	if n == nil {
		return arch.Pos{}
	}
	return arch.Pos{File: file, Line: n.Line, Col: n.Column}
}

func diagnostic(p arch.Pos, sev tlisp.Severity, format string, args ...any) tlisp.Diagnostic {
	return tlisp.Diagnostic{Pos: p, Severity: sev, Message: fmt.Sprintf(format, args...)}
}
