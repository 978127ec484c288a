// Command funclen fails when a function or method outside tests and generated code is longer
// than a limit (default 100 lines, from the func keyword to the closing brace), unless an allow
// list names it. `make lint` runs it on the whole tree:
//
//	go run ./hack/funclen -allow hack/funclen/allow.txt .
//
// It walks the directories given (default "."), skipping the directories the go command
// ignores (testdata, vendor, and names starting with "." or "_"), *_test.go files and files
// marked generated ("// Code generated ... DO NOT EDIT.", go/ast.IsGenerated).
//
// Each line of the allow list is "DIR NAME REASON...": DIR is the package directory relative
// to the walked root (slash-separated), NAME the function ("Declare") or method
// ("planner.planResource", the receiver's type without * or type parameters), REASON why it
// may stay long. Blank lines and lines starting with # are ignored. An entry that no longer
// matches a long function is an error too, so the list only ever holds what is needed.
//
// Exit status: 0 when every long function is allowed and every entry is used, 1 otherwise
// (each finding on its own line on stderr), 2 for bad usage or an unreadable input.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	limit := flag.Int("max", 100, "the longest a function may be, in lines")
	allowFile := flag.String("allow", "", "the allow list (see the package documentation); empty allows nothing")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"."}
	}
	allow := map[key]string{}
	if *allowFile != "" {
		f, err := os.Open(*allowFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		allow, err = readAllow(f, *allowFile)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
	}
	var long []Func
	for _, root := range roots {
		found, err := LongFuncs(root, *limit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
		long = append(long, found...)
	}
	problems := Check(long, allow, *limit)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "funclen: %d problem(s): split the function into named steps of at most %d lines, or (only for the embedded engine's planner and applier) list it in %s\n",
			len(problems), *limit, *allowFile)
		os.Exit(1)
	}
}

// key names a function: its package directory and its name (Type.Method for a method).
type key struct{ dir, name string }

// Func is one function longer than the limit.
type Func struct {
	// Dir is the package directory relative to the walked root, slash-separated.
	Dir string
	// Name is the function's name, or Type.Method for a method.
	Name string
	// Pos is the file:line of its func keyword; Lines its length in lines.
	Pos   string
	Lines int
}

// LongFuncs returns the functions under root longer than limit lines, skipping what the
// package documentation says is skipped. A file that does not parse is an error.
func LongFuncs(root string, limit int) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := end.Line - start.Line + 1; n > limit {
				out = append(out, Func{Dir: filepath.ToSlash(rel), Name: funcName(fd), Pos: fmt.Sprintf("%s:%d", p, start.Line), Lines: n})
			}
		}
		return nil
	})
	return out, err
}

// funcName is fd's name, or Type.Method for a method (the receiver's type without pointer or
// type parameters).
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// readAllow reads an allow list (see the package documentation) from r; name is its name in
// errors. An entry without a reason, or listed twice, is an error.
func readAllow(r io.Reader, name string) (map[key]string, error) {
	allow := map[key]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want DIR NAME REASON..., got %q", name, n, line)
		}
		k := key{dir: path.Clean(f[0]), name: f[1]}
		if _, dup := allow[k]; dup {
			return nil, fmt.Errorf("%s:%d: %s %s is listed twice", name, n, k.dir, k.name)
		}
		allow[k] = strings.Join(f[2:], " ")
	}
	return allow, sc.Err()
}

// Check returns one message per long function the allow list does not name, then one per
// allow entry that names no long function (sorted), so a finished split also leaves the list.
func Check(long []Func, allow map[key]string, limit int) []string {
	var problems []string
	used := map[key]bool{}
	for _, f := range long {
		k := key{dir: f.Dir, name: f.Name}
		if _, ok := allow[k]; ok {
			used[k] = true
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: %s is %d lines (more than %d)", f.Pos, f.Name, f.Lines, limit))
	}
	var stale []string
	for k := range allow {
		if !used[k] {
			stale = append(stale, fmt.Sprintf("allow list: %s %s is no longer over %d lines (or is gone): remove its entry", k.dir, k.name, limit))
		}
	}
	slices.Sort(stale)
	return append(problems, stale...)
}
