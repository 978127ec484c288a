package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/manifest"
)

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
// per LavaArchitecture document for a manifest (decoded and checked against the CRD by
// internal/manifest, as lava up reads it). Documents of another kind are skipped with a
// warning; empty documents silently. A file with no LavaArchitecture at all is an error.
func loadUnits(name string, data []byte) ([]unit, tlisp.Diagnostics) {
	start := arch.Pos{File: name, Line: 1, Col: 1}
	if isTlisp(name, data) {
		return []unit{{File: name, Label: name, SourceKind: "file", SourceName: name, SourceText: data, Pos: start}}, nil
	}
	var units []unit
	var diags tlisp.Diagnostics
	docs, err := manifest.Decode(data)
	for _, d := range docs {
		docPos := nodePos(name, d.Root)
		switch {
		case len(d.Errors) > 0:
			for _, e := range d.Errors {
				diags = append(diags, diagnostic(arch.Pos{File: name, Line: e.Line, Col: e.Col}, tlisp.SeverityError, "%s", e.Msg))
			}
		case d.Skipped():
			diags = append(diags, diagnostic(docPos, tlisp.SeverityWarning,
				"document %d (kind %q, apiVersion %q) is not a LavaArchitecture; skipped", d.Index+1, d.Kind, d.APIVersion))
		default:
			units = append(units, manifestUnit(name, data, d))
		}
	}
	if err != nil {
		p, msg := start, err.Error()
		var pe *manifest.PosError
		if errors.As(err, &pe) {
			p, msg = arch.Pos{File: name, Line: pe.Line, Col: pe.Col}, pe.Msg
		}
		diags = append(diags, diagnostic(p, tlisp.SeverityError, "%s", msg))
	}
	if len(units) == 0 && !diags.HasErrors() {
		diags = append(diags, diagnostic(start, tlisp.SeverityError,
			"no LavaArchitecture document found (a .tlisp file needs the .tlisp extension or must start with \"(\")"))
	}
	return units, diags
}

// manifestUnit is the unit of d, a LavaArchitecture document of file name (whose content is
// data): its source, bindings and gate, with their positions in the file. What the CLI cannot
// read itself is a diagnostic of the unit: bindingsFrom (a warning) and sourceRef (an error).
func manifestUnit(name string, data []byte, d manifest.Document) unit {
	obj, root := d.Object, d.Root
	label := fmt.Sprintf("%s#%d (%s)", name, d.Index+1, obj.Name)
	u := unit{
		File:  name,
		Label: label,
		Bindings: tlisp.Bindings{
			Scalars: obj.Spec.Bindings,
			Lists:   obj.Spec.ListBindings,
			Records: obj.Spec.RecordBindings,
		},
		Gate:       obj.Spec.Gate,
		Pos:        nodePos(name, root),
		BindingPos: map[string]arch.Pos{},
		Key:        obj.Namespace + "/" + obj.Name,
		KeyPos:     nodePos(name, manifest.FieldNode(root, "metadata.name")),
	}
	spec := manifest.ValueNode(root, "spec")
	for _, field := range []string{"bindings", "listBindings", "recordBindings"} {
		if bs := manifest.ValueNode(spec, field); bs != nil && bs.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(bs.Content); j += 2 {
				if _, seen := u.BindingPos[bs.Content[j].Value]; !seen {
					u.BindingPos[bs.Content[j].Value] = nodePos(name, bs.Content[j])
				}
			}
		}
	}
	if g := manifest.ValueNode(spec, "gate"); g != nil {
		u.GatePos = nodePos(name, g)
	} else if spec != nil {
		u.GatePos = nodePos(name, spec)
	} else {
		u.GatePos = u.Pos
	}
	var diags tlisp.Diagnostics
	if len(obj.Spec.BindingsFrom) > 0 {
		diags = append(diags, diagnostic(nodePos(name, manifest.FieldNode(root, "spec.bindingsFrom")), tlisp.SeverityWarning,
			"spec.bindingsFrom is not read by the CLI (it needs the cluster's ConfigMaps and Secrets); use --set"))
	}
	if ap := obj.Spec.ApprovePlan; ap != "" && ap != v1alpha1.ApprovePlanAuto && ap != v1alpha1.ApprovePlanManual && !engine.IsPlanID(ap) {
		diags = append(diags, diagnostic(nodePos(name, manifest.FieldNode(root, "spec.approvePlan")), tlisp.SeverityWarning,
			"spec.approvePlan %q is neither auto, manual nor a plan id (64 hexadecimal digits, status.plan.id): no plan matches it, so every plan waits for approval", ap))
	}
	switch src := obj.Spec.Source; {
	case src.Inline != "":
		u.SourceKind = "inline"
		u.SourceText = []byte(src.Inline)
		u.MapPos = manifest.InlineMapper(name, data, manifest.ValueNode(spec, "source", "inline"))
	case src.Name != "":
		u.SourceKind = "name"
		u.SourceName = src.Name
		u.SourcePos = nodePos(name, manifest.ValueNode(spec, "source", "name"))
	default:
		diags = append(diags, diagnostic(nodePos(name, manifest.FieldNode(root, "spec.sourceRef")), tlisp.SeverityError,
			"spec.sourceRef (a Flux source) is read in the cluster, not by the CLI; render the file at %s of your checkout with `lava render PATH`", obj.Spec.Path))
	}
	u.Diags = diags
	return u
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
