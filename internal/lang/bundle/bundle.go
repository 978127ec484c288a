// Package bundle reads the modules bundled in a rendered document (docs/design/0017-modules-and-bundled-sources.md):
// the document's top-level "//" property holds {"lava_modules": {"modules/net": { ...that
// module's main.tf.json... }}}. It owns the path rules every reader shares (a bundled
// directory is a clean relative path inside the configuration; a local module source
// resolves only inside the bundle): the engines (internal/engine), the renderer that builds
// bundles (internal/lang/render) and the tenant policy that checks them (internal/lang/policy).
// It imports only the standard library.
package bundle

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Key is the property of the rendered document's top-level "//" object that carries
// bundled modules: {"//": {"lava_modules": {"modules/net": { ...Terraform JSON... }}}}. Each
// key is a module directory relative to the root ("modules/net"), each value that module's
// main.tf.json. Terraform's JSON syntax ignores "//" properties (comments), so tofu reads
// the same document.
const Key = "lava_modules"

// Read returns the modules bundled in a rendered document by directory (nil when it has
// none). A directory must pass [CheckDir]; a module must be a JSON object.
func Read(rendered []byte) (map[string][]byte, error) {
	var doc struct {
		Comment json.RawMessage `json:"//"`
	}
	if err := json.Unmarshal(rendered, &doc); err != nil || len(doc.Comment) == 0 || doc.Comment[0] != '{' {
		// Not an object: a plain comment, or a parse error that hcl reports with its place.
		return nil, nil
	}
	var comment map[string]json.RawMessage
	if err := json.Unmarshal(doc.Comment, &comment); err != nil {
		return nil, nil
	}
	raw, ok := comment[Key]
	if !ok {
		return nil, nil
	}
	var mods map[string]json.RawMessage
	if err := json.Unmarshal(raw, &mods); err != nil {
		return nil, fmt.Errorf(`"//".%s: want an object of module directories: %w`, Key, err)
	}
	out := make(map[string][]byte, len(mods))
	for dir, body := range mods {
		if err := CheckDir(dir); err != nil {
			return nil, fmt.Errorf(`"//".%s: %w`, Key, err)
		}
		if len(body) == 0 || body[0] != '{' {
			return nil, fmt.Errorf(`"//".%s[%q]: want the module's Terraform JSON object`, Key, dir)
		}
		out[dir] = body
	}
	return out, nil
}

// CheckDir accepts a bundled module directory: relative, clean, inside the configuration
// (never "/x", "../x" or "a/../b"), letters, digits, '-', '_', '.' and '/' only, and no
// element starting with '.' (so never .terraform, where tofu keeps the providers it runs).
func CheckDir(dir string) error {
	if dir == "" || dir != path.Clean(dir) || path.IsAbs(dir) || dir == "." || dir == ".." || strings.HasPrefix(dir, "../") {
		return fmt.Errorf("module directory %q: want a clean relative path inside the configuration (modules/NAME)", dir)
	}
	for _, c := range dir {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./", c)) {
			return fmt.Errorf("module directory %q: only letters, digits, '-', '_', '.' and '/'", dir)
		}
	}
	for _, part := range strings.Split(dir, "/") {
		if part == ".." || strings.HasPrefix(part, ".") {
			return fmt.Errorf("module directory %q: no element may start with '.'", dir)
		}
	}
	return nil
}

// IsLocal reports whether a module source is a local path ("./x" or "../x"), which resolves
// inside the bundle; every other source is remote (a registry, git, HTTP).
func IsLocal(source string) bool {
	return strings.HasPrefix(source, "./") || strings.HasPrefix(source, "../")
}

// Resolve returns the bundle directory a local source names when called from the module in
// caller ("" for the root): source joined with caller, as tofu does. A source that is not
// local, or that leaves the configuration or names no valid directory ([CheckDir]), is an
// error. Whether the directory is bundled is the caller's question.
func Resolve(caller, source string) (string, error) {
	if !IsLocal(source) {
		return "", fmt.Errorf("source %q is not a local path (./DIR or ../DIR)", source)
	}
	dir := path.Join(caller, source)
	if dir == "." || dir == ".." || strings.HasPrefix(dir, "../") {
		return "", fmt.Errorf("source %q leaves the configuration", source)
	}
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("source %q: %w", source, err)
	}
	return dir, nil
}

// Calls returns the module calls of one module's Terraform JSON (the root document or a
// bundled module), each call's name mapped to its source ("" when the call sets none or not
// as a string).
func Calls(doc []byte) (map[string]string, error) {
	var d struct {
		Module map[string]json.RawMessage `json:"module"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if len(d.Module) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(d.Module))
	for name, raw := range d.Module {
		var m struct {
			Source any `json:"source"`
		}
		_ = json.Unmarshal(raw, &m) // an array body or a non-string source: no source here
		s, _ := m.Source.(string)
		out[name] = s
	}
	return out, nil
}
