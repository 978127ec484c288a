package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/tlisp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// bindingsHeader reads an optional "; bindings: {...}" line: the JSON of a tlisp.Bindings with
// the keys scalars, lists and records.
var bindingsHeader = regexp.MustCompile(`(?m)^; bindings: (.*)$`)

func caseBindings(t *testing.T, src []byte) tlisp.Bindings {
	t.Helper()
	var b struct {
		Scalars map[string]string              `json:"scalars"`
		Lists   map[string][]string            `json:"lists"`
		Records map[string][]map[string]string `json:"records"`
	}
	if m := bindingsHeader.FindSubmatch(src); m != nil {
		if err := json.Unmarshal(m[1], &b); err != nil {
			t.Fatalf("bindings header: %v", err)
		}
	}
	return tlisp.Bindings{Scalars: b.Scalars, Lists: b.Lists, Records: b.Records}
}

// TestGolden renders every testdata/*.tlisp and compares with <case>.tf.json (and the warnings
// with <case>.warnings when there are any). Run with -update to rewrite them, then review.
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.tlisp")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".tlisp")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			a, diags := tlisp.EvalArchitecture(src, caseBindings(t, src), tlisp.Options{File: name + ".tlisp"})
			if a == nil {
				t.Fatalf("evaluation failed: %v", diags)
			}
			pretty, err := renderJSON(a, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			compact, err := renderJSON(a, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkForms(t, pretty, compact)
			var warn strings.Builder
			for _, d := range diags {
				warn.WriteString(d.String())
				warn.WriteByte('\n')
			}
			compareGolden(t, strings.TrimSuffix(f, ".tlisp")+".tf.json", pretty)
			wf := strings.TrimSuffix(f, ".tlisp") + ".warnings"
			if warn.Len() > 0 || fileExists(wf) {
				compareGolden(t, wf, []byte(warn.String()))
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/lang/render -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// checkForms asserts that pretty and compact are valid JSON, the same document, and formatted
// exactly as encoding/json's Indent and Compact would format them.
func checkForms(t *testing.T, pretty, compact []byte) {
	t.Helper()
	if !json.Valid(pretty) || !json.Valid(compact) {
		t.Fatalf("invalid JSON:\n%s\n%s", pretty, compact)
	}
	if !bytes.HasSuffix(pretty, []byte("\n")) || bytes.HasSuffix(compact, []byte("\n")) {
		t.Errorf("trailing newline: pretty must end with one, compact must not")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, pretty); err != nil {
		t.Fatal(err)
	}
	if c.String() != string(compact) {
		t.Errorf("Compact(pretty) != compact:\n%s\n%s", c.String(), compact)
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, compact, "", "  "); err != nil {
		t.Fatal(err)
	}
	ind.WriteByte('\n')
	if ind.String() != string(pretty) {
		t.Errorf("Indent(compact) != pretty:\n%s\n%s", ind.String(), pretty)
	}
}

var expectLine = regexp.MustCompile(`(?m)^; expect: (.*)$`)

// TestErrorCases evaluates testdata/errors/*.tlisp and requires exactly the errors listed in
// their "; expect: line:col: message" lines, in order.
func TestErrorCases(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/errors/*.tlisp")
	if err != nil || len(files) == 0 {
		t.Fatalf("no error cases: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, m := range expectLine.FindAllSubmatch(src, -1) {
				want = append(want, string(m[1]))
			}
			a, diags := tlisp.EvalArchitecture(src, caseBindings(t, src), tlisp.Options{})
			if a != nil {
				t.Error("architecture returned despite errors")
			}
			var got []string
			for _, d := range diags.Errors() {
				got = append(got, d.String())
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
