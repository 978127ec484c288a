package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// runLava runs the CLI in-process and returns its exit code, stdout and stderr.
func runLava(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestRender_seedCompact: `lava render -o compact` of the seed manifest prints the exact
// compact JSON on stdout and the warning about the undeclared `name` binding on stderr.
// testdata/seed-prod-vpc.yaml is the seed manifest, of which
// examples/cloud/prod-vpc.yaml must be a copy.
func TestRender_seedCompact(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../../examples/cloud/prod-vpc.yaml", "testdata/seed-prod-vpc.yaml"} {
		code, stdout, stderr := runLava(t, "", "render", "-o", "compact", f)
		if code != exitOK {
			t.Fatalf("%s: exit %d, stderr:\n%s", f, code, stderr)
		}
		if want := `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.42.0.0/16"}}}}` + "\n"; stdout != want {
			t.Errorf("%s: stdout = %q, want %q", f, stdout, want)
		}
		// The warning points at :inputs inside the inline source, mapped into the manifest
		// (line 12, column 9 = 6 spaces of block indentation + column 3 of the source line).
		want := f + `:12:9: warning: binding "name" is not declared in the :inputs of demo-vpc (ignored)`
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
		if strings.Contains(stderr, "error") {
			t.Errorf("stderr has an error:\n%s", stderr)
		}
	}
	example, _ := os.ReadFile("../../examples/cloud/prod-vpc.yaml")
	seed, _ := os.ReadFile("testdata/seed-prod-vpc.yaml")
	if len(seed) == 0 || !bytes.Equal(example, seed) {
		t.Error("examples/cloud/prod-vpc.yaml is not a copy of the seed manifest")
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		// stdout is compared exactly when not empty; stderr must contain every string.
		stdout string
		stderr []string
	}{
		{
			name:   "pretty by default",
			args:   []string{"render", "../../examples/cloud/prod-vpc.yaml"},
			stdout: "{\n  \"resource\": {\n    \"aws_vpc\": {\n      \"main\": {\n        \"cidr_block\": \"10.42.0.0/16\"\n      }\n    }\n  }\n}\n",
		},
		{
			name:   "--set overrides the manifest binding",
			args:   []string{"render", "-o", "compact", "--set", "cidr=10.9.0.0/16", "../../examples/cloud/prod-vpc.yaml"},
			stdout: `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.9.0.0/16"}}}}` + "\n",
		},
		{
			name:   "the manifest's gate still applies to flags",
			args:   []string{"render", "--set", "cidr=10.9.0.0/33", "../../examples/cloud/prod-vpc.yaml"},
			code:   exitInvalid,
			stderr: []string{"../../examples/cloud/prod-vpc.yaml:17:9: error: interface `aws-vpc-network` rejected 1 field(s): type error on input `cidr`"},
		},
		{
			name:   "--no-gate drops the manifest's gate",
			args:   []string{"render", "-o", "compact", "--no-gate", "--set", "cidr=10.9.0.0/33", "../../examples/cloud/prod-vpc.yaml"},
			stdout: `{"resource":{"aws_vpc":{"main":{"cidr_block":"10.9.0.0/33"}}}}` + "\n",
		},
		{
			name:   "tlisp on stdin",
			stdin:  "(deflava-architecture x :inputs ((:n \"a\")) :resources ((terraform-data \"d\" :input \"{n}\")))",
			args:   []string{"render", "-o", "compact", "--set", "n=b"},
			stdout: `{"resource":{"terraform_data":{"d":{"input":"b"}}}}` + "\n",
		},
		{
			name:   "manifest on stdin with -",
			stdin:  "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: dns}\nspec:\n  source:\n    name: dns-record-set\n",
			args:   []string{"render", "-o", "compact", "-"},
			stdout: `{"provider":{"aws":{}},"resource":{"aws_route53_record":{"main-apex":{"zone_id":"Z0000000000000000000","name":"example.com","type":"A","ttl":300,"records":["1.2.3.4"]},"main-www":{"zone_id":"Z0000000000000000000","name":"www.example.com","type":"A","ttl":300,"records":["1.2.3.4"]}}},"output":{"apex-id":{"value":"${aws_route53_record.main-apex.id}"},"www-id":{"value":"${aws_route53_record.main-www.id}"}}}` + "\n",
		},
		{
			name:   "list binding from flags",
			args:   []string{"render", "-o", "compact", "--set-list", "extra=ana,bo", "--set", "dir=/tmp/lava-demo/default/d", "../../examples/greeting.tlisp"},
			stdout: `{"resource":{"local_file":{"greeting":{"filename":"/tmp/lava-demo/default/d/greeting.txt","content":"hello lava\n"},"extra-0":{"filename":"/tmp/lava-demo/default/d/hello-ana.txt","content":"hello ana\n"},"extra-1":{"filename":"/tmp/lava-demo/default/d/hello-bo.txt","content":"hello bo\n"}}},"output":{"greeting-file":{"value":"${local_file.greeting.filename}"}}}` + "\n",
		},
		{
			name:   "record binding from flags replaces the manifest's rows",
			args:   []string{"render", "-o", "compact", "--record", `repos={"slug":"a","description":"A"}`, "--record", `repos=[{"slug":"b","description":"B"}]`, "../../examples/cloud/repos.yaml"},
			stdout: `{"provider":{"github":{}},"resource":{"github_repository":{"a":{"name":"a","description":"A","visibility":"private","has_issues":true},"b":{"name":"b","description":"B","visibility":"private","has_issues":true}}}}` + "\n",
		},
		{
			name: "several documents: one JSON value per LavaArchitecture, other kinds skipped",
			args: []string{"render", "-o", "compact", "testdata/multi.yaml"},
			stdout: `{"resource":{"terraform_data":{"d-a":{"input":"a"}}}}` + "\n" +
				`{"resource":{"terraform_data":{"d-b":{"input":"b"}}}}` + "\n",
			stderr: []string{`testdata/multi.yaml:1:1: warning: document 1 (kind "Namespace", apiVersion "v1") is not a LavaArchitecture; skipped`},
		},
		{
			name:   "a bundled architecture renders without warnings about its own :result",
			args:   []string{"render", "-o", "compact", "../../examples/cloud/aws-vpc-network.yaml"},
			stderr: []string{},
		},
		{
			name:   "unknown gate",
			args:   []string{"render", "--gate", "nope", "../../examples/greeting.tlisp"},
			code:   exitInvalid,
			stderr: []string{`../../examples/greeting.tlisp: error: unknown bundled interface "nope"`},
		},
		{
			name:   "gate rejection from the flag",
			args:   []string{"render", "--gate", "dns-record-set", "../../examples/greeting.tlisp"},
			code:   exitInvalid,
			stderr: []string{"error: interface `dns-record-set` rejected 3 field(s): missing required input `zone-id`"},
		},
		{
			name:   "evaluation error quotes the manifest line",
			args:   []string{"render", "testdata/inline-error.yaml"},
			code:   exitInvalid,
			stderr: []string{"testdata/inline-error.yaml:13:24: error: type mismatch: expected value (not kw)", "\n             :cidr-block :oops)))\n  " + strings.Repeat(" ", 23) + "^\n"},
		},
		{name: "missing file", args: []string{"render", "testdata/does-not-exist.yaml"}, code: exitInvalid, stderr: []string{"lava: read testdata/does-not-exist.yaml:"}},
		{name: "bad output format", args: []string{"render", "-o", "yaml", "../../examples/cloud/prod-vpc.yaml"}, code: exitUsage, stderr: []string{`-o "yaml": want json or compact`}},
		{name: "--set without =", args: []string{"render", "--set", "cidr", "../../examples/cloud/prod-vpc.yaml"}, code: exitUsage, stderr: []string{`--set "cidr": want KEY=VALUE`}},
		{name: "a bundled architecture's name", args: []string{"render", "modules-demo"}, code: exitInvalid, stderr: []string{"modules-demo is a bundled architecture", "spec.source.name is modules-demo"}},
		{name: "bad --record JSON", args: []string{"render", "--record", "r=[1]", "../../examples/cloud/repos.yaml"}, code: exitUsage, stderr: []string{"--record r:"}},
		{name: "two files", args: []string{"render", "a", "b"}, code: exitUsage, stderr: []string{"accepts at most 1 arg(s)"}},
		{name: "unknown flag", args: []string{"render", "--nope"}, code: exitUsage, stderr: []string{"unknown flag: --nope"}},
		{name: "--gate with --no-gate", args: []string{"render", "--gate", "x", "--no-gate"}, code: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runLava(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout = %q\nwant     %q", stdout, tt.stdout)
			}
			if tt.code != exitOK && stdout != "" {
				t.Errorf("a failed render printed on stdout: %q", stdout)
			}
			if tt.stderr != nil && len(tt.stderr) == 0 && stderr != "" {
				t.Errorf("stderr is not empty:\n%s", stderr)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}
