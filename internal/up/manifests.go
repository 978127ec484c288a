package up

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
	sigsyaml "sigs.k8s.io/yaml"

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

// FileError is a file that could not be read or holds an invalid document. Resources that
// came from it are left as they are until it reads again.
type FileError struct {
	// File is the file's path.
	File string
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
func (e *FileError) Unwrap() error { return e.Err }

// manifestExts are the file extensions read from a directory.
var manifestExts = []string{".yaml", ".yml", ".json"}

// ListFiles expands paths: a file is taken as it is; a directory gives its *.yaml, *.yml and
// *.json files (not its subdirectories), in lexical order. A path that does not exist is an
// error.
func ListFiles(paths []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		if !st.IsDir() {
			add(p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("up: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !slices.Contains(manifestExts, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			add(filepath.Join(p, e.Name()))
		}
	}
	return out, nil
}

// ReadManifests reads every LavaArchitecture document of the files paths expands to
// ([ListFiles]). Documents of another kind and empty documents are skipped. A file that
// cannot be read or parsed, or a document that is not a valid LavaArchitecture, gives a
// [FileError] and none of that file's manifests (so a half-saved file never deletes what it
// held). A second document with the same namespace/name is reported as an error of its file.
func ReadManifests(paths []string) ([]Manifest, []*FileError, error) {
	files, err := ListFiles(paths)
	if err != nil {
		return nil, nil, err
	}
	var (
		out  []Manifest
		errs []*FileError
		seen = map[string]string{}
	)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, &FileError{File: f, Err: err})
			continue
		}
		ms, err := ParseManifests(f, data)
		if err == nil {
			for _, m := range ms {
				if prev, ok := seen[m.Key()]; ok {
					err = &PosError{Line: m.Line, Col: m.Col, Msg: fmt.Sprintf("%s is already defined at %s", m.Key(), prev)}
					break
				}
			}
		}
		if err != nil {
			errs = append(errs, &FileError{File: f, Err: err})
			continue
		}
		for _, m := range ms {
			seen[m.Key()] = fmt.Sprintf("%s:%d:%d", f, m.Line, m.Col)
		}
		out = append(out, ms...)
	}
	return out, errs, nil
}

// ParseManifests parses the LavaArchitecture documents of one YAML (or JSON) file. The first
// problem is returned, as a [*PosError] when it has a position (every problem
// [DecodeDocument] finds has one). A second document with the same namespace/name is an error.
func ParseManifests(file string, data []byte) ([]Manifest, error) {
	var out []Manifest
	seen := map[string]string{}
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
				return nil, &PosError{Line: line, Col: 1, Msg: "invalid YAML: " + msg}
			}
			return nil, fmt.Errorf("invalid YAML: %s", msg)
		}
		obj, root, errs := DecodeDocument(&doc, i)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		if obj == nil {
			continue
		}
		at := FieldNode(root, "metadata.name")
		m := Manifest{Object: obj, File: file, Index: i, Line: at.Line, Col: at.Column}
		if obj.Spec.Source.Inline != "" {
			m.MapInline = InlineMapper(file, data, mapValue(mapValue(mapValue(root, "spec"), "source"), "inline"))
		}
		if prev, ok := seen[m.Key()]; ok {
			return nil, &PosError{Line: m.Line, Col: m.Col, Msg: fmt.Sprintf("%s is already defined at %s", m.Key(), prev)}
		}
		seen[m.Key()] = fmt.Sprintf("%s:%d:%d", file, m.Line, m.Col)
		out = append(out, m)
	}
}

// DecodeDocument decodes document index (0-based) of a manifest file as a LavaArchitecture:
// strictly (an unknown field is an error), with metadata.namespace defaulted to "default",
// status and identity cleared, and checked with [CheckObject]. obj is nil (and errs empty) for
// an empty document or one of another kind; root is the document's top node. Every error is
// a [*PosError] at the offending key.
func DecodeDocument(doc *yaml.Node, index int) (obj *v1alpha1.LavaArchitecture, root *yaml.Node, errs []*PosError) {
	root = doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, root, nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, root, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, root, []*PosError{nodeErr(root, "document %d is not a mapping: a LavaArchitecture manifest is expected", index+1)}
	}
	raw, err := yaml.Marshal(root)
	if err != nil {
		return nil, root, []*PosError{nodeErr(root, "document %d: %v", index+1, err)}
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := sigsyaml.Unmarshal(raw, &tm); err != nil {
		return nil, root, []*PosError{nodeErr(root, "document %d: %s", index+1, jsonErr(err))}
	}
	if tm.Kind != "LavaArchitecture" || !strings.HasPrefix(tm.APIVersion, v1alpha1.GroupVersion.Group+"/") {
		return nil, root, nil
	}
	if tm.APIVersion != v1alpha1.GroupVersion.String() {
		return nil, root, []*PosError{nodeErr(FieldNode(root, "apiVersion"), "apiVersion %s: want %s", tm.APIVersion, v1alpha1.GroupVersion)}
	}
	obj = &v1alpha1.LavaArchitecture{}
	if err := sigsyaml.UnmarshalStrict(raw, obj); err != nil {
		return nil, root, []*PosError{nodeErr(root, "document %d is not a valid LavaArchitecture: %s", index+1, jsonErr(err))}
	}
	for _, fe := range CheckObject(obj) {
		errs = append(errs, nodeErr(FieldNode(root, fe.Path), "%s", fe.Message))
	}
	if len(errs) > 0 {
		return nil, root, errs
	}
	if obj.Namespace == "" {
		obj.Namespace = "default"
	}
	// What the file says about status or identity is not the user's to set.
	obj.Status = v1alpha1.LavaArchitectureStatus{}
	obj.UID, obj.Generation, obj.ResourceVersion = "", 0, ""
	return obj, root, nil
}

// jsonErr is a sigs.k8s.io/yaml error without its "error unmarshaling JSON: " prefixes.
func jsonErr(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
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

// mapValue returns the value node of key in mapping node n, or nil.
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
