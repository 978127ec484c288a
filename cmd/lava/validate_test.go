package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

var expectRE = regexp.MustCompile(`expect (\d+):(\d+)`)

// TestValidate_malformed runs `lava validate` on every malformed case (testdata/malformed
// plus an inline manifest): each exits 1 and reports an error at the
// line and column named in the file's first comment, quoting that line with a caret.
func TestValidate_malformed(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/malformed/*.tlisp")
	if err != nil || len(files) < 5 {
		t.Fatalf("malformed cases: %v %v", files, err)
	}
	files = append(files, "testdata/inline-error.yaml")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := expectRE.FindStringSubmatch(string(data))
			if m == nil {
				t.Fatalf("%s has no `expect L:C` comment", f)
			}
			code, stdout, stderr := runLava(t, "", "validate", f)
			if code != exitInvalid {
				t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			want := f + ":" + m[1] + ":" + m[2] + ": error: "
			if !strings.Contains(stderr, want) {
				t.Fatalf("stderr lacks %q:\n%s", want, stderr)
			}
			// The caret line sits under the reported column of the quoted line.
			lines := strings.Split(stderr, "\n")
			for i, l := range lines {
				if strings.HasPrefix(l, want) && i+2 < len(lines) {
					col := len([]rune(strings.TrimPrefix(lines[i+2], "  ")))
					if !strings.HasSuffix(lines[i+2], "^") || col != atoi(t, m[2]) {
						t.Errorf("caret line %q is not under column %s", lines[i+2], m[2])
					}
					break
				}
			}
			if strings.Contains(stdout, "ok") {
				t.Errorf("stdout reports ok: %q", stdout)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout []string
		stderr []string
	}{
		{
			name:   "examples pass, warnings are not failures",
			args:   []string{"validate", "../../examples/cloud/prod-vpc.yaml", "../../examples/greeting.tlisp"},
			stdout: []string{"../../examples/cloud/prod-vpc.yaml#1 (prod-vpc): ok (1 resource)", "../../examples/greeting.tlisp: ok (1 resource)"},
			stderr: []string{"../../examples/cloud/prod-vpc.yaml:12:9: warning: binding \"name\" is not declared", "\n          :inputs ((:cidr \"10.42.0.0/16\"))\n          ^\n"},
		},
		{
			// A .tlisp source is checked in namespace default unless --namespace names another:
			// under lava up's policy, its files go only under /tmp/lava-demo/NAMESPACE.
			name:   "a .tlisp source is checked in namespace default",
			args:   []string{"validate", "-"},
			stdin:  "(deflava-architecture g\n  :resources ((local-file \"f\" :filename \"/tmp/lava-demo/demo/f.txt\" :content \"x\")))\n",
			code:   exitInvalid,
			stderr: []string{`<stdin>:2:15: error: policy: resource local_file.f attribute filename: the path "/tmp/lava-demo/demo/f.txt" is outside the allowed directories (fileWriteRoots: /tmp/lava-demo/default)`},
		},
		{
			name:   "--namespace checks a .tlisp source in another namespace",
			args:   []string{"validate", "--namespace", "demo", "-"},
			stdin:  "(deflava-architecture g\n  :resources ((local-file \"f\" :filename \"/tmp/lava-demo/demo/f.txt\" :content \"x\")))\n",
			stdout: []string{"<stdin>: ok (1 resource)"},
		},
		{
			// A mistyped approvePlan holds every plan: said at its key, not an error.
			name:   "an approvePlan that no plan can match is a warning",
			args:   []string{"validate", "-"},
			stdin:  "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: t}\nspec:\n  approvePlan: manul\n  source:\n    inline: |\n      (deflava-architecture t :resources ((terraform-data \"d\" :input \"x\")))\n",
			stdout: []string{"<stdin>#1 (t): ok (1 resource)"},
			stderr: []string{`<stdin>:5:3: warning: spec.approvePlan "manul" is neither auto, manual nor a plan id`},
		},
		{
			name:   "every file is checked and every error counted",
			args:   []string{"validate", "testdata/malformed/no-resources.tlisp", "../../examples/cloud/prod-vpc.yaml", "testdata/malformed/extra-paren.tlisp"},
			code:   exitInvalid,
			stdout: []string{"prod-vpc): ok"},
			stderr: []string{"no-resources.tlisp:2:1: error: missing :resources clause", "extra-paren.tlisp:4:4: error: unexpected close paren"},
		},
		{
			name: "gate rejection points at the binding in the manifest",
			args: []string{"validate", "testdata/bad-binding.yaml"},
			code: exitInvalid,
			stderr: []string{
				"testdata/bad-binding.yaml:11:9: error: interface `dns-record-set` rejected 2 field(s): missing required input `zone-id`",
				"testdata/bad-binding.yaml:11:9: error: missing required input `zone-id`",
				"testdata/bad-binding.yaml:9:5: error: type error on input `domain`: `-bad` is not a valid RFC 1123 hostname",
			},
		},
		{
			name:   "a binding replaced by a flag has no manifest position",
			args:   []string{"validate", "--set", "domain=also bad", "testdata/bad-binding.yaml"},
			code:   exitInvalid,
			stderr: []string{"testdata/bad-binding.yaml:11:9: error: type error on input `domain`: `also bad` is not a valid RFC 1123 hostname"},
		},
		{
			name:   "a manifest that is not YAML",
			args:   []string{"validate", "testdata/not-yaml.yaml"},
			code:   exitInvalid,
			stderr: []string{"testdata/not-yaml.yaml:3:1: error: invalid YAML:"},
		},
		{
			name:   "unknown bundled name and unknown gate, each at its manifest position",
			args:   []string{"validate", "testdata/unknown-names.yaml"},
			code:   exitInvalid,
			stderr: []string{"testdata/unknown-names.yaml:6:18: error: unknown bundled architecture \"nope\"", "testdata/unknown-names.yaml:7:9: error: unknown bundled interface \"nah\""},
		},
		{
			name:   "errors inside a bundled architecture quote the bundled file",
			args:   []string{"validate", "-"},
			stdin:  "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: dns}\nspec:\n  source:\n    name: dns-record-set\n",
			stdout: []string{"<stdin>#1 (dns): ok (2 resources)"},
		},
		{name: "missing file", args: []string{"validate", "testdata/nope.tlisp"}, code: exitInvalid, stderr: []string{"testdata/nope.tlisp: error: read testdata/nope.tlisp:"}},
		{name: "no file", args: []string{"validate"}, code: exitUsage, stderr: []string{"requires at least 1 arg(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runLava(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

func TestWriteDiag(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000) + "Y" + strings.Repeat("z", 1000)
	srcs := sources{"f.tlisp": []byte("(a\n\t(b \"é\" :c))\r\n"), "long.yaml": []byte(long + "\n")}
	tests := []struct {
		name  string
		d     tlisp.Diagnostic
		quote bool
		want  string
	}{
		{
			name:  "tabs are copied so the caret lines up; columns are runes",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "f.tlisp", Line: 2, Col: 9}, Severity: tlisp.SeverityError, Message: "boom"},
			quote: true,
			want:  "f.tlisp:2:9: error: boom\n  \t(b \"é\" :c))\n  \t       ^\n",
		},
		{
			name:  "warning without quote",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "f.tlisp", Line: 1, Col: 1}, Severity: tlisp.SeverityWarning, Message: "hm"},
			quote: false,
			want:  "f.tlisp:1:1: warning: hm\n",
		},
		{
			name:  "no position: the label stands in",
			d:     tlisp.Diagnostic{Severity: tlisp.SeverityError, Message: "unknown bundled interface \"x\""},
			quote: true,
			want:  "label: error: unknown bundled interface \"x\"\n",
		},
		{
			name:  "column past the end of the line",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "f.tlisp", Line: 1, Col: 4}, Severity: tlisp.SeverityError, Message: "eof"},
			quote: true,
			want:  "f.tlisp:1:4: error: eof\n  (a\n     ^\n",
		},
		{
			name:  "a long line is cut to 120 runes around the column, caret aligned",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "long.yaml", Line: 1, Col: 1001}, Severity: tlisp.SeverityError, Message: "y"},
			quote: true,
			want:  "long.yaml:1:1001: error: y\n  …" + strings.Repeat("x", 59) + "Y" + strings.Repeat("z", 58) + "…\n  " + strings.Repeat(" ", 60) + "^\n",
		},
		{
			name:  "a long line cut at its start",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "long.yaml", Line: 1, Col: 2}, Severity: tlisp.SeverityError, Message: "y"},
			quote: true,
			want:  "long.yaml:1:2: error: y\n  " + strings.Repeat("x", 119) + "…\n   ^\n",
		},
		{
			name:  "a long line cut at its end, column past it",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "long.yaml", Line: 1, Col: 2002}, Severity: tlisp.SeverityError, Message: "y"},
			quote: true,
			want:  "long.yaml:1:2002: error: y\n  …" + strings.Repeat("z", 119) + "\n  " + strings.Repeat(" ", 120) + "^\n",
		},
		{
			name:  "unknown file: no quote",
			d:     tlisp.Diagnostic{Pos: arch.Pos{File: "other", Line: 1, Col: 1}, Severity: tlisp.SeverityError, Message: "x"},
			quote: true,
			want:  "other:1:1: error: x\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			writeDiag(&b, tt.d, "label", srcs, tt.quote)
			if b.String() != tt.want {
				t.Errorf("got  %q\nwant %q", b.String(), tt.want)
			}
		})
	}
}

// TestInlineMapper checks the manifest position of a point inside an inline source for each
// scalar style.
func TestInlineMapper(t *testing.T) {
	t.Parallel()
	const header = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: m}\nspec:\n  source:\n"
	tests := []struct {
		name string
		yaml string
		in   arch.Pos
		want arch.Pos
	}{
		{"literal", header + "    inline: |\n      (a\n        b)\n", arch.Pos{Line: 2, Col: 3}, arch.Pos{File: "m", Line: 8, Col: 9}},
		{"literal strip with blank line", header + "    inline: |-\n\n      (a\n\n        b)\n", arch.Pos{Line: 4, Col: 3}, arch.Pos{File: "m", Line: 10, Col: 9}},
		{"explicit indentation", header + "    inline: |2\n         (a b)\n", arch.Pos{Line: 1, Col: 4}, arch.Pos{File: "m", Line: 7, Col: 10}},
		{"plain one line", header + "    inline: (a b c)\n", arch.Pos{Line: 1, Col: 4}, arch.Pos{File: "m", Line: 6, Col: 16}},
		{"double quoted one line", header + "    inline: \"(a b c)\"\n", arch.Pos{Line: 1, Col: 4}, arch.Pos{File: "m", Line: 6, Col: 17}},
		{"quoted with escapes maps to the value", header + "    inline: \"(a \\\"b\\\" c)\"\n", arch.Pos{Line: 1, Col: 8}, arch.Pos{File: "m", Line: 6, Col: 13}},
		{"folded maps to the value", header + "    inline: >\n      (a\n        b)\n", arch.Pos{Line: 2, Col: 3}, arch.Pos{File: "m", Line: 6, Col: 13}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			units, diags := loadUnits("m", []byte(tt.yaml))
			if len(units) != 1 || diags.HasErrors() {
				t.Fatalf("loadUnits: %d units, %v", len(units), diags)
			}
			u := units[0]
			if u.MapPos == nil {
				t.Fatal("no MapPos")
			}
			if got := u.MapPos(tt.in); got != tt.want {
				t.Errorf("MapPos(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzLoadUnits feeds arbitrary files to the manifest reader and the synthesis of what it
// finds: nothing may panic, and a position inside an inline source maps to a valid position.
func FuzzLoadUnits(f *testing.F) {
	for _, seed := range []string{
		"../../examples/cloud/prod-vpc.yaml", "../../examples/cloud/subnets.yaml", "../../examples/cloud/repos.yaml",
		"testdata/multi.yaml", "testdata/inline-error.yaml", "testdata/not-yaml.yaml",
	} {
		data, err := os.ReadFile(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add("spec:\n  source:\n    inline: |2\n  x\n")
	f.Fuzz(func(t *testing.T, data string) {
		units, _ := loadUnits("f.yaml", []byte(data))
		for _, u := range units {
			if u.MapPos != nil {
				if p := u.MapPos(arch.Pos{Line: 1, Col: 1}); !p.IsValid() {
					t.Errorf("MapPos(1:1) = %v", p)
				}
			}
			synthesizeUnit(u, sources{}, policy.Config{}, "default")
		}
	})
}

// TestValidate_crdRules: lava validate rejects, at the offending key, what lava up and the
// API server reject (the shared internal/manifest check), and a namespace/name defined twice
// across the files given.
func TestValidate_crdRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const hdr = "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\n"
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, data string
		want       string
	}{
		{"engine warp", hdr + "metadata: {name: a}\nspec:\n  source: {name: dns-record-set}\n  engine: warp\n", `:6:3: error: spec.engine: unsupported value "warp"`},
		{"empty bindingsFrom entry", hdr + "metadata: {name: a}\nspec:\n  source: {name: dns-record-set}\n  bindingsFrom:\n  - {}\n", ":7:5: error: spec.bindingsFrom[0]: exactly one of configMapRef, secretRef or outputsRef must be set"},
		{"no name", hdr + "metadata: {namespace: x}\nspec:\n  source: {name: dns-record-set}\n", ":3:1: error: metadata.name: required"},
		{"invalid names", hdr + "metadata: {name: \"Bad Name!\", namespace: \"UPPER\"}\nspec:\n  source: {name: dns-record-set}\n", `:3:12: error: metadata.name: "Bad Name!" is not a DNS-1123 subdomain`},
		{"short drift interval", hdr + "metadata: {name: a}\nspec:\n  source: {name: dns-record-set}\n  driftInterval: 5s\n", ":6:3: error: spec.driftInterval: must be at least 30s (got 5s)"},
	}
	for _, tt := range tests {
		p := write(strings.ReplaceAll(tt.name, " ", "-")+".yaml", tt.data)
		code, stdout, stderr := runLava(t, "", "validate", p)
		if code != exitInvalid || !strings.Contains(stderr, p+tt.want) || strings.Contains(stdout, "ok") {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and stderr containing %q", tt.name, code, stdout, stderr, p+tt.want)
		}
	}
	one := write("one.yaml", hdr+"metadata: {name: a, namespace: infra}\nspec:\n  source: {name: dns-record-set}\n")
	two := write("two.yaml", "# again\n"+hdr+"metadata: {namespace: infra, name: a}\nspec:\n  source: {name: dns-record-set}\n")
	code, _, stderr := runLava(t, "", "validate", one, two)
	want := two + ":4:30: error: infra/a is already defined at " + one + ":3:12"
	if code != exitInvalid || !strings.Contains(stderr, want) {
		t.Errorf("duplicate across files: exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
}
