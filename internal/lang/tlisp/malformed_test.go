package tlisp

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var expectRE = regexp.MustCompile(`^; expect (\d+):(\d+)`)

// TestMalformedCases checks the product's acceptance cases: each file in testdata/malformed
// must fail with an error at exactly the line:col its first comment names.
func TestMalformedCases(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/malformed/*.tlisp")
	if err != nil || len(files) == 0 {
		t.Fatalf("no malformed cases: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := expectRE.FindSubmatch(src)
			if m == nil {
				t.Fatalf("%s: first line has no `; expect L:C`", f)
			}
			line, _ := strconv.Atoi(string(m[1]))
			col, _ := strconv.Atoi(string(m[2]))
			a, diags := EvalArchitecture(src, Bindings{}, Options{File: f})
			if a != nil {
				t.Fatalf("evaluated without error: %+v", a)
			}
			errs := diags.Errors()
			if len(errs) == 0 {
				t.Fatalf("no error diagnostics: %v", diags)
			}
			found := false
			for _, d := range errs {
				if d.Pos.Line == line && d.Pos.Col == col && d.Pos.File == f {
					found = true
				}
			}
			if !found {
				t.Errorf("want an error at %s:%d:%d, got %v", f, line, col, errs)
			}
			if got := diags.Err().Error(); got != errs[0].String() {
				t.Errorf("Err() = %q, want first error %q", got, errs[0].String())
			}
		})
	}
}
