package engine

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/lava-operator/lava/internal/lang/bundle"
)

// BundleKey is the property of the rendered document's top-level "//" object that carries
// bundled modules: {"//": {"lava_modules": {"modules/net": { ...Terraform JSON... }}}}. Each
// key is a module directory relative to the root ("modules/net"), each value that module's
// main.tf.json. Terraform's JSON syntax ignores "//" properties (comments), so tofu reads
// the same document; the tofu engine writes each module to DIR/main.tf.json of its
// workspace. docs/design/0017-modules-and-bundled-sources.md. The path rules live in
// internal/lang/bundle, which the renderer and the tenant policy share.
const BundleKey = bundle.Key

// ReadBundle returns the modules bundled in a rendered document by directory (nil when it
// has none). A directory must be relative, clean and inside the bundle ("modules/net", never
// "/x", "../x" or "a/../b"; [bundle.CheckDir]); a module must be a JSON object.
func ReadBundle(rendered []byte) (map[string][]byte, error) { return bundle.Read(rendered) }

// WriteBundle writes each module bundled in rendered to DIR/main.tf.json under root (the
// tofu engine's workspace), directories mode 0700, files 0600.
func WriteBundle(root string, rendered []byte) error {
	mods, err := ReadBundle(rendered)
	if err != nil {
		return err
	}
	for dir, body := range mods {
		d := filepath.Join(root, filepath.FromSlash(dir))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "main.tf.json"), body, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ModuleCalls returns a canonical description of the module calls of rendered and of every
// module bundled in it (each module's directory with its calls' names and sources), nil when
// there are none: what `tofu init` installs into .terraform/modules.
func ModuleCalls(rendered []byte) ([]byte, error) {
	mods, err := ReadBundle(rendered)
	if err != nil {
		return nil, err
	}
	calls := map[string]map[string]string{}
	read := func(dir string, doc []byte) error {
		var d struct {
			Module map[string]struct {
				Source string `json:"source"`
			} `json:"module"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			return err
		}
		if len(d.Module) == 0 {
			return nil
		}
		calls[dir] = map[string]string{}
		for name, m := range d.Module {
			calls[dir][name] = m.Source
		}
		return nil
	}
	if err := read("", rendered); err != nil {
		return nil, err
	}
	for dir, body := range mods {
		if err := read(dir, body); err != nil {
			return nil, err
		}
	}
	if len(calls) == 0 {
		return nil, nil
	}
	return json.Marshal(calls) // maps marshal with sorted keys
}
