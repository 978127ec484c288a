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
)

// Manifest is one LavaArchitecture document read from a file.
type Manifest struct {
	// Object is the document, with metadata.namespace defaulted to "default".
	Object *v1alpha1.LavaArchitecture
	// File is the file it came from; Index its 0-based document index there.
	File  string
	Index int
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

func (e *FileError) Error() string { return e.File + ": " + e.Err.Error() }
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
					err = fmt.Errorf("document %d: %s is already defined in %s", m.Index+1, m.Key(), prev)
					break
				}
			}
		}
		if err != nil {
			errs = append(errs, &FileError{File: f, Err: err})
			continue
		}
		for _, m := range ms {
			seen[m.Key()] = f
		}
		out = append(out, ms...)
	}
	return out, errs, nil
}

// ParseManifests parses the LavaArchitecture documents of one YAML (or JSON) file.
func ParseManifests(file string, data []byte) ([]Manifest, error) {
	var out []Manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("invalid YAML: %w", err)
		}
		root := &doc
		if root.Kind == yaml.DocumentNode {
			if len(root.Content) == 0 {
				continue
			}
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			continue
		}
		raw, err := yaml.Marshal(root)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if tm.Kind != "LavaArchitecture" || !strings.HasPrefix(tm.APIVersion, v1alpha1.GroupVersion.Group+"/") {
			continue
		}
		if tm.APIVersion != v1alpha1.GroupVersion.String() {
			return nil, fmt.Errorf("document %d: apiVersion %s: want %s", i+1, tm.APIVersion, v1alpha1.GroupVersion)
		}
		obj := &v1alpha1.LavaArchitecture{}
		if err := sigsyaml.UnmarshalStrict(raw, obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if obj.Name == "" {
			return nil, fmt.Errorf("document %d: metadata.name is required", i+1)
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		if err := validateSpec(obj.Spec); err != nil {
			return nil, fmt.Errorf("document %d (%s/%s): %w", i+1, obj.Namespace, obj.Name, err)
		}
		// What the file says about status or identity is not the user's to set.
		obj.Status = v1alpha1.LavaArchitectureStatus{}
		obj.UID, obj.Generation, obj.ResourceVersion = "", 0, ""
		out = append(out, Manifest{Object: obj, File: file, Index: i})
	}
}

// validateSpec checks what the CRD's admission rules check for a file source: exactly one
// source kind, and rev and path with url.
func validateSpec(s v1alpha1.LavaArchitectureSpec) error {
	n := 0
	for _, set := range []bool{s.Source.Inline != "", s.Source.Name != "", s.Source.URL != ""} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return errors.New("spec.source: exactly one of inline, name or url must be set")
	case s.Source.URL != "" && (s.Source.Rev == "" || s.Source.Path == ""):
		return errors.New("spec.source: url needs rev and path")
	}
	switch s.Engine {
	case "", v1alpha1.EngineEmbedded, v1alpha1.EngineTofu, v1alpha1.EngineTerraform:
	default:
		return fmt.Errorf("spec.engine %q: want embedded, tofu or terraform", s.Engine)
	}
	return nil
}
