package tlisp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse reads arbitrary bytes: no panic escapes, every diagnostic has a position inside
// the source, and a source read without diagnostics prints back (Node.String) to text that
// reads to the same forms.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/malformed/*.tlisp")
	for _, p := range files {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, s := range []string{`(a "b\n\"c" :d 12 -3 #t #f ; x` + "\n" + `(e,f))`, "#true", ":", `a"b`, "(((", ")))", "\"\\", "é ü"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		forms, diags := Parse(src, Options{File: "f"})
		for _, d := range diags {
			if strings.HasPrefix(d.Message, "internal error") {
				t.Fatalf("recovered panic: %s", d)
			}
			if !d.Pos.IsValid() || d.Pos.Offset < 0 || d.Pos.Offset > len(src) {
				t.Fatalf("diagnostic without a position in the source: %+v", d)
			}
		}
		if len(diags) > 0 {
			return
		}
		printed := sexpr(forms)
		again, diags := Parse([]byte(strings.ReplaceAll(printed, " | ", "\n")), Options{})
		if len(diags) > 0 {
			t.Fatalf("printed forms do not read back: %v\n%s", diags, printed)
		}
		if got := sexpr(again); got != printed {
			t.Fatalf("round trip:\n%s\n%s", printed, got)
		}
	})
}
