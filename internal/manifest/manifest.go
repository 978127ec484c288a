package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/lang/arch"
)

// Manifest is one LavaArchitecture document read from a file.
type Manifest struct {
	// Object is the document, with metadata.namespace defaulted to "default".
	Object *v1alpha1.LavaArchitecture
	// File is the file it came from; Index its 0-based document index there.
	File  string
	Index int
	// Line and Col (1-based) locate the document's metadata.name key in File.
	Line, Col int
	// MapInline maps a position inside spec.source.inline (file "inline", as the synth
	// service reports it) to File ([InlineMapper]); nil for another source kind.
	MapInline func(arch.Pos) arch.Pos
}

// Key is "namespace/name".
func (m Manifest) Key() string { return m.Object.Namespace + "/" + m.Object.Name }

// FileError is a file that could not be read or holds an invalid document (Key empty:
// resources that came from it are left as they are until it reads again), or one document
// of a file that [Reader.Read] refuses on its own (Key set: a namespace/name that another file
// defines too).
type FileError struct {
	// File is the file's path.
	File string
	// Key is the namespace/name of the one document refused; empty when the whole file is.
	Key string
	// Err is what went wrong.
	Err error
}

// Error is "file:line:col: message" for a [PosError], "file: message" otherwise: the format of
// `lava validate`'s diagnostics.
func (e *FileError) Error() string {
	var pe *PosError
	if errors.As(e.Err, &pe) {
		return e.File + ":" + pe.Error()
	}
	return e.File + ": " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// PosError is a problem at a position of a manifest file.
type PosError struct {
	// Line and Col are 1-based (Col counts runes, as yaml.v3 does).
	Line, Col int
	// Msg says what is wrong.
	Msg string
}

// Error is "line:col: message".
func (e *PosError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// nodeErr is a [PosError] at node n.
func nodeErr(n *yaml.Node, format string, args ...any) *PosError {
	return &PosError{Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// Exts are the file extensions [ListFiles] reads from a directory.
var Exts = []string{".yaml", ".yml", ".json"}

// ListFiles expands paths: a file is taken as it is; a directory gives its *.yaml, *.yml and
// *.json files (not its subdirectories, nor hidden files), in lexical order. A file named twice
// (also as another spelling of the same absolute path) is listed once, as first named. A path
// that does not exist is an error.
func ListFiles(paths []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		id := p
		if abs, err := filepath.Abs(p); err == nil {
			id = abs
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if !st.IsDir() {
			add(p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !slices.Contains(Exts, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			add(filepath.Join(p, e.Name()))
		}
	}
	return out, nil
}

// Parse parses the LavaArchitecture documents of one YAML (or JSON) file. The first problem
// is returned, as a [*PosError] when it has a position (every problem [Decode] finds in a
// document has one). A second document with the same namespace/name is an error.
func Parse(file string, data []byte) ([]Manifest, error) {
	docs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	var out []Manifest
	keys := Keys{}
	for _, d := range docs {
		if len(d.Errors) > 0 {
			return nil, d.Errors[0]
		}
		if d.Object == nil {
			continue
		}
		at := FieldNode(d.Root, "metadata.name")
		m := Manifest{Object: d.Object, File: file, Index: d.Index, Line: at.Line, Col: at.Column}
		if d.Object.Spec.Source.Inline != "" {
			m.MapInline = InlineMapper(file, data, ValueNode(d.Root, "spec", "source", "inline"))
		}
		if pe := keys.Define(m.Key(), file, m.Line, m.Col); pe != nil {
			return nil, pe
		}
		out = append(out, m)
	}
	return out, nil
}

// Keys records where each namespace/name of a set of manifests is defined
// ("file:line:col"), to report a second definition.
type Keys map[string]string

// Conflict returns the [*PosError] "KEY is already defined at FILE:LINE:COL" at line:col when
// key is defined already, else nil.
func (k Keys) Conflict(key string, line, col int) *PosError {
	prev, ok := k[key]
	if !ok {
		return nil
	}
	return &PosError{Line: line, Col: col, Msg: fmt.Sprintf("%s is already defined at %s", key, prev)}
}

// Define records key as defined at file:line:col, unless it is defined already: then it
// returns [Keys.Conflict]'s error and keeps the first definition.
func (k Keys) Define(key, file string, line, col int) *PosError {
	if pe := k.Conflict(key, line, col); pe != nil {
		return pe
	}
	k[key] = fmt.Sprintf("%s:%d:%d", file, line, col)
	return nil
}

// Document is one document of a manifest file.
type Document struct {
	// Index is the document's 0-based index in its file.
	Index int
	// Root is the document's top node (a mapping for a manifest); nil for an empty document.
	Root *yaml.Node
	// APIVersion and Kind are the document's type; both empty when it has none (or is not a
	// mapping).
	APIVersion, Kind string
	// Object is the LavaArchitecture (see [DecodeDocument]); nil for an empty document, one
	// of another kind, and one with Errors.
	Object *v1alpha1.LavaArchitecture
	// Errors are the document's problems, each at its YAML node, in document order.
	Errors []*PosError
}

// Skipped reports whether d is a document of another kind than LavaArchitecture (or a mapping
// without a kind): not an error, not a manifest.
func (d Document) Skipped() bool { return d.Root != nil && d.Object == nil && len(d.Errors) == 0 }

// Decode splits data (a multi-document YAML or JSON file) into its non-empty documents, each
// decoded with [DecodeDocument]. A YAML syntax error ends the file: the documents before it are
// returned with it, as a [*PosError] ("invalid YAML: ...", at column 1 of its line) when the
// parser names a line, else as an error without a position.
func Decode(data []byte) ([]Document, error) {
	var out []Document
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			line, msg := YAMLError(err)
			if line > 0 {
				return out, &PosError{Line: line, Col: 1, Msg: "invalid YAML: " + msg}
			}
			return out, fmt.Errorf("invalid YAML: %s", msg)
		}
		if d := DecodeDocument(&doc, i); d.Root != nil {
			out = append(out, d)
		}
	}
}

// DecodeDocument decodes document index (0-based) of a manifest file. A LavaArchitecture
// (kind LavaArchitecture of group lava.pleme.io) is decoded strictly (an unknown field is an
// error) into Object, with metadata.namespace defaulted to "default", status and identity
// cleared, and checked with [Validate]; a document of another kind keeps only its type. Errors:
// a document that is not a mapping, whose type does not decode, of another version of the
// group, that does not decode strictly, or that [Validate] rejects, each at the offending node.
func DecodeDocument(doc *yaml.Node, index int) Document {
	d := Document{Index: index}
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return d
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return d
	}
	d.Root = root
	fail := func(pe *PosError) Document {
		d.Errors = append(d.Errors, pe)
		return d
	}
	if root.Kind != yaml.MappingNode {
		return fail(nodeErr(root, "document %d is not a mapping: a LavaArchitecture manifest is expected", index+1))
	}
	obj, fields, err := decodeObject(root)
	if err != nil {
		return fail(nodeErr(root, "document %d: %v", index+1, err))
	}
	d.APIVersion, d.Kind = fields.apiVersion, fields.kind
	if d.Kind != "LavaArchitecture" || !strings.HasPrefix(d.APIVersion, v1alpha1.GroupVersion.Group+"/") {
		return d
	}
	if d.APIVersion != v1alpha1.GroupVersion.String() {
		return fail(nodeErr(FieldNode(root, "apiVersion"), "apiVersion %s: want %s", d.APIVersion, v1alpha1.GroupVersion))
	}
	if fields.strictErr != nil {
		return fail(nodeErr(fields.strictAt, "document %d is not a valid LavaArchitecture: %s", index+1, fields.strictErr))
	}
	if obj.Namespace == "" {
		obj.Namespace = "default"
	}
	// What the file says about status or identity is not the user's to set.
	obj.Status = v1alpha1.LavaArchitectureStatus{}
	obj.UID, obj.Generation, obj.ResourceVersion = "", 0, ""
	for _, fe := range Validate(obj, fields.content) {
		d.Errors = append(d.Errors, nodeErr(FieldNode(root, fe.Path), "%s", fe.Message))
	}
	if len(d.Errors) > 0 {
		slices.SortStableFunc(d.Errors, func(a, b *PosError) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Col - b.Col
		})
		d.Errors = slices.CompactFunc(d.Errors, func(a, b *PosError) bool { return *a == *b })
		return d
	}
	d.Object = obj
	return d
}

// YAMLError splits a go.yaml.in/yaml/v3 decoder error ("yaml: line N: message") into the
// 1-based line it is about (0 when it names none) and the message.
func YAMLError(err error) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	if i := strings.Index(msg, ": "); strings.HasPrefix(msg, "line ") && i > 0 {
		if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr != nil || line < 0 {
			line = 0
		}
		msg = msg[i+2:]
	}
	if line > 0 && slices.Contains(yamlParserProblems, msg) {
		line++
	}
	return line, msg
}

// yamlParserProblems are the messages of go.yaml.in/yaml/v3's parser (not scanner) errors,
// whose "line N" is 0-based (the decoder adds 1 only for scanner errors).
var yamlParserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}
