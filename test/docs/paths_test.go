package docs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// documents are the globs, relative to root, of the documents whose paths must resolve.
var documents = []string{"docs/*.md", "docs/design/*.md", "README.md", "bench/README.md", "examples/README.md", "services/*/README.md"}

var (
	// pathRef is a repository path after a start of line, space, bracket, punctuation, quote or
	// backtick (so never inside a URL or a Go import path), with an optional ./ and optional
	// :line or :Symbol suffixes.
	pathRef = regexp.MustCompile("(?:^|[\\s(\\[,;\"'`])(?:\\./)?((?:internal|cmd|api|config|deploy|hack|test|bench|services|docs|examples|proto)/[A-Za-z0-9_.\\-/*]*)((?::[A-Za-z0-9_.]+)*)")
	// linkRef is the target of a Markdown link.
	linkRef = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// designNumber is a design note named by its number alone.
	designNumber = regexp.MustCompile(`^docs/design/([0-9]{4})$`)
	// placeholder is an upper-case path segment standing for any name: NAME, NNNN-NAME.md.
	placeholder = regexp.MustCompile(`^[A-Z][A-Z_-]*[A-Z](\.[a-z]+)?$`)
	// identifier is a Go identifier; exported is one that starts with an upper-case letter.
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	exported   = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	// kubeResource is `deploy/NAME` as kubectl takes it.
	kubeResource = regexp.MustCompile(`^deploy/[a-z0-9-]+$`)
)

// TestDocs_repositoryPathsResolve: every repository path and relative link in the documents
// names something the tree holds (the forms are in the package doc).
func TestDocs_repositoryPathsResolve(t *testing.T) {
	t.Parallel()
	var docs []string
	for _, g := range documents {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatalf("no document matches %s", g)
		}
		docs = append(docs, m...)
	}
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, doc)
		sc := bufio.NewScanner(bytes.NewReader(text))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, m := range pathRef.FindAllStringSubmatch(line, -1) {
				ref, suffix := m[1], m[2]
				if kubeResource.MatchString(ref) && strings.Contains(line, "kubectl ") {
					continue
				}
				checked++
				if err := resolve(ref, suffix); err != nil {
					t.Errorf("%s:%d: %s%s: %v", name, n, ref, suffix, err)
				}
			}
			for _, m := range linkRef.FindAllStringSubmatch(line, -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if _, err := os.Stat(filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %s: %v", name, n, m[1], err)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if checked < 100 {
		t.Errorf("only %d paths found in %d documents: the pattern no longer finds them", checked, len(docs))
	}
}

// TestResolve: the checker accepts every form of the package doc and refuses what the tree
// does not hold.
func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ref, suffix string
		ok          bool
	}{
		{"test/docs/paths_test.go", "", true},
		{"test/docs/", "", true},
		{"./test/docs/...", "", true},
		{"test/docs/paths_test.go.", "", true},
		{"test/docs/paths_test.go", ":1", true},
		{"test/docs/paths_test.go", ":1:2", true},
		{"test/docs/paths_test.go", ":resolve", true},
		{"test/docs/paths_test.go", ":TestResolve", true},
		{"api/v1alpha1.LavaArchitecture", "", true},
		{"api/v1alpha1.LavaArchitecture.DeepCopy", "", true},
		{"api/v1alpha1.LavaArchitecture.Spec", "", true},
		{"docs/design/0001", "", true},
		{"services/*/README.md", "", true},
		{"docs/design/NNNN-NAME.md", "", true},
		{"test/docs/missing.go", "", false},
		{"test/docs/missing/", "", false},
		{"test/docs/paths_test.go", ":100000", false},
		{"test/docs/paths_test.go", ":noSuchFunction", false},
		{"test/docs/doc.go", ":root", false},
		{"api/v1alpha1.NoSuchSymbol", "", false},
		{"api/v1alpha1.LavaArchitecture.NoSuchMember", "", false},
		{"api/v1alpha1.go", "", false},
		{"docs/design/9999", "", false},
		{"services/*/MISSING.txt", "", false},
	} {
		if err := resolve(tt.ref, tt.suffix); (err == nil) != tt.ok {
			t.Errorf("resolve(%q, %q) = %v, want ok %v", tt.ref, tt.suffix, err, tt.ok)
		}
	}
}

// resolve checks one path reference: ref (relative to root, in one of the forms of the
// package doc) and suffix (":LINE", ":Symbol", ":LINE:COL" or empty).
func resolve(ref, suffix string) error {
	p := strings.TrimRight(ref, ",;:")
	p = strings.TrimSuffix(p, "/...")
	p = strings.TrimRight(p, ".")
	p = strings.TrimRight(p, "/")
	if m := designNumber.FindStringSubmatch(p); m != nil {
		notes, _ := filepath.Glob(filepath.Join(root, "docs", "design", m[1]+"-*.md"))
		if len(notes) != 1 {
			return fmt.Errorf("%d design notes numbered %s, want 1", len(notes), m[1])
		}
		return nil
	}
	full := filepath.Join(root, filepath.FromSlash(p))
	if info, err := os.Stat(full); err == nil {
		if suffix == "" || info.IsDir() {
			return nil
		}
		return resolveSuffix(full, strings.TrimPrefix(suffix, ":"))
	}
	if pattern, ok := globOf(p); ok {
		if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern))); len(m) > 0 {
			return nil
		}
		return fmt.Errorf("nothing matches %s", pattern)
	}
	// A package and a symbol it declares: dir/pkg.Symbol or dir/pkg.Type.Method.
	dir, sym, ok := strings.Cut(p[strings.LastIndex(p, "/")+1:], ".")
	if ok {
		pkg := filepath.Join(filepath.Dir(full), dir)
		if info, err := os.Stat(pkg); err == nil && info.IsDir() {
			return declares(pkg, sym)
		}
	}
	return errors.New("no such file or directory")
}

// globOf turns a path with a glob or placeholder segments into a glob pattern.
func globOf(p string) (string, bool) {
	segs := strings.Split(p, "/")
	changed := strings.Contains(p, "*")
	for i, s := range segs {
		if m := placeholder.FindStringSubmatch(s); m != nil {
			segs[i], changed = "*"+m[1], true
		}
	}
	return strings.Join(segs, "/"), changed
}

// resolveSuffix checks what follows a file: a line number (and column) within the file, or,
// for a Go file, a function or method the file declares.
func resolveSuffix(file, suffix string) error {
	first, _, _ := strings.Cut(suffix, ":")
	text, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if line, err := strconv.Atoi(first); err == nil {
		if n := bytes.Count(text, []byte("\n")) + 1; line < 1 || line > n {
			return fmt.Errorf("line %d of a %d-line file", line, n)
		}
		return nil
	}
	if filepath.Ext(file) != ".go" || !identifier.MatchString(first) {
		return fmt.Errorf("%q is neither a line nor a Go function", first)
	}
	if !regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + first + `[\[(]`).Match(text) {
		return fmt.Errorf("the file declares no function %s", first)
	}
	return nil
}

// declares checks that the Go package in dir declares sym: a top-level function, type,
// variable or constant (also in a group), or Type.Member: a method of Type or a field.
func declares(dir, sym string) error {
	names := strings.Split(sym, ".")
	if len(names) > 2 || !exported.MatchString(names[0]) || !identifier.MatchString(names[len(names)-1]) {
		return fmt.Errorf("%q is no exported Go symbol", sym)
	}
	var src bytes.Buffer
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			src.Write(b)
			src.WriteByte('\n')
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	top := regexp.MustCompile(`(?m)^((func (\([^)]*\) )?|type |var |const )` + names[0] + `\b|\t` + names[0] + `\s+[^:\s])`)
	if !top.Match(src.Bytes()) {
		return fmt.Errorf("package %s declares no %s", dir, names[0])
	}
	if len(names) == 2 {
		member := regexp.MustCompile(`(?m)^(func \(\w* ?\*?` + names[0] + `(\[[^\]]*\])?\) |\t)` + names[1] + `\b`)
		if !member.Match(src.Bytes()) {
			return fmt.Errorf("package %s declares no %s.%s", dir, names[0], names[1])
		}
	}
	return nil
}
