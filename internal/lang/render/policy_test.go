package render

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/functions"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestCheckPolicy_attacks is the policy gate of docs/security.md "Engines" on inline sources a
// tenant could write: each case is refused by the default policy with the rule named at the
// form's file:line:col, and a clean source passes.
func TestCheckPolicy_attacks(t *testing.T) {
	tests := []struct {
		name, src string
		b         tlisp.Bindings
		want      []string // substrings of the joined diagnostics; none: passes
	}{
		{name: "local-exec provisioner", src: `(deflava-architecture x
  :resources ((terraform-data "run" :input "a"
                :provisioner (:local-exec (:command "touch /tmp/pwned")))))`,
			want: []string{"in.tlisp:2:15: policy: resource terraform_data.run: a provisioner block is not allowed"}},
		{name: "connection block", src: `(deflava-architecture x
  :resources ((terraform-data "run" :connection (:host "h"))))`,
			want: []string{"in.tlisp:2:15: policy: resource terraform_data.run: a connection block is not allowed"}},
		{name: "file function in an attribute", src: `(deflava-architecture x
  :resources ((terraform-data "leak" :input "${file(\"/var/run/secrets/kubernetes.io/serviceaccount/token\")}")))`,
			want: []string{"in.tlisp:2:15: policy: resource terraform_data.leak attribute input: the function file is not allowed", "at column 3"}},
		{name: "core::file and templatefile in an output, nested in a map", src: `(deflava-architecture x
  :resources ((terraform-data "r" :input "a"))
  :outputs (:o "${upper(core::file(\"/etc/hostname\"))}" :p ((k "%{if true}${templatefile(\"/x\", {a = 1})}%{~endif~}"))))`,
			want: []string{"in.tlisp:3:13: policy: output o: the function core::file is not allowed", "in.tlisp:3:58: policy: output p: the function templatefile is not allowed"}},
		{name: "filesystem function in a local and a for_each", src: `(deflava-architecture x
  :locals (:l "${fileset(\"/\", \"*\")}")
  :resources ((terraform-data "r" :input (:k "${abspath(\".\")}"))))`,
			want: []string{"in.tlisp:2:12: policy: local l: the function fileset is not allowed", "resource terraform_data.r attribute input: the function abspath is not allowed"}},
		{name: "remote state and external data sources", src: `(deflava-architecture x
  :resources ((terraform-data "r" :input "a"))
  :data ((terraform-remote-state "other" :backend "s3") (external "prog" :program ("sh" "-c" "id"))))`,
			want: []string{"data source terraform_remote_state.other: the terraform_remote_state data source is not allowed", "data source external.prog: the external data source is not allowed"}},
		// hashicorp/local v2.6.0's local_command runs a program.
		{name: "local_command data source", src: `(deflava-architecture x
  :resources ((terraform-data "ok" :input "a"))
  :data ((local-command "pwn" :command "sh" :arguments ("-c" "id > /tmp/lava-demo/pwned"))))`,
			want: []string{"data source local_command.pwn: the local_command data source is not allowed"}},
		{name: "dot-dot provider source", src: `(deflava-architecture x
  :providers ((evil :source "../../tmp/evil"))
  :resources ((terraform-data "r" :input "a")))`,
			want: []string{`in.tlisp:2:15: policy: provider evil: provider source "../../tmp/evil" is not a registry address`}},
		{name: "separator in a provider type", src: `(deflava-architecture x
  :providers ((evil :source "registry.opentofu.org/hashicorp/a\\b"))
  :resources ((terraform-data "r" :input "a")))`,
			want: []string{`policy: provider evil: provider source "registry.opentofu.org/hashicorp/a\\b" is not a registry address`}},
		{name: "templatestring re-evaluates an escaped literal", src: `(deflava-architecture x
  :locals (:t "$${file(\"/key\")}")
  :resources ((terraform-data "r" :input "${templatestring(local.t, {})}")))`,
			want: []string{"in.tlisp:3:15: policy: resource terraform_data.r attribute input: the function templatestring is not allowed"}},
		{name: "nonsensitive unmarks a value derived from a Secret binding", src: `(deflava-architecture x
  :inputs ((:pw ""))
  :resources ((terraform-data "r" :input "${tonumber(strrev(nonsensitive(\"{pw}\")))}")))`,
			want: []string{"in.tlisp:3:15: policy: resource terraform_data.r attribute input: the function nonsensitive is not allowed"}},
		{name: "unparseable template", src: `(deflava-architecture x
  :resources ((terraform-data "r" :input "${file(")))`,
			want: []string{"does not parse, so it cannot be checked"}},
		// hcl's parser recurses once per level: 100,000 levels overflow the stack, a fatal error
		// that ends synth.
		{name: "a template nested 100,000 levels", src: `(deflava-architecture x
  :resources ((terraform-data "r" :input "${` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}")))`,
			want: []string{"in.tlisp:2:15: policy: resource terraform_data.r attribute input: This template nests more than 256 levels deep"}},
		{name: "unary minus 100,000 times in a local", src: `(deflava-architecture x
  :locals (:l "${0 + ` + strings.Repeat("-", 100_000) + `1}")
  :resources ((terraform-data "r" :input "${local.l}")))`,
			want: []string{"in.tlisp:2:12: policy: local l: This template nests more than 256 levels deep"}},
		{name: "quotes nested 50,000 levels in an output", src: `(deflava-architecture x
  :resources ((terraform-data "r" :input "a"))
  :outputs (:o "` + strings.Repeat(`${\"`, 50_000) + "x" + strings.Repeat(`\"}`, 50_000) + `"))`,
			want: []string{"in.tlisp:3:13: policy: output o: This template nests more than 256 levels deep"}},
		{name: "a binding holding a call is data, not a call", src: `(deflava-architecture x
  :inputs ((:v ""))
  :resources ((terraform-data "r" :input "{v}")))`,
			b: tlisp.Bindings{Scalars: map[string]string{"v": `${file("/etc/hostname")}`}}},
		{name: "the source's own references and functions pass", src: `(deflava-architecture x
  :providers ((testkit :source "example/testkit"))
  :resources ((terraform-data "a" :input "x") (terraform-data "b" :input "${upper(terraform_data.a.output)}")))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{SourceKind: SourceInline, SourceText: []byte(tt.src), File: "in.tlisp", Bindings: tt.b}
			out, ds := Synthesize(in)
			if out == nil {
				t.Fatalf("synthesize: %v", errorsOf(ds))
			}
			got := CheckPolicy(in, out, policy.Default())
			joined := got.String()
			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("refused:\n%s", joined)
			}
			for _, w := range tt.want {
				if !strings.Contains(joined, w) {
					t.Errorf("diagnostics lack %q:\n%s", w, joined)
				}
			}
		})
	}
}

// TestCheckPolicy_everyFilesystemFunction: every one of Terraform's filesystem functions (the
// list of OpenTofu's "Filesystem Functions" and the hash functions that read a file), templatestring,
// nonsensitive and a provider-defined function are refused by the default policy wherever they stand, each
// named with its file:line:col. The list is written out here, not taken from
// policy.DefaultDeniedFunctions, so dropping a name from the default fails this test.
func TestCheckPolicy_everyFilesystemFunction(t *testing.T) {
	for _, fn := range []string{"abspath", "file", "filebase64", "filebase64sha256", "filebase64sha512",
		"fileexists", "filemd5", "fileset", "filesha1", "filesha256", "filesha512", "pathexpand",
		"templatefile", "templatestring", "nonsensitive", "provider::testkit::read"} {
		t.Run(fn, func(t *testing.T) {
			// As many arguments as the function takes, so synthesis passes the call to the policy.
			args := []string{`\"/etc/hostname\"`}
			if sig, ok := functions.Lookup(fn); ok {
				for len(args) < sig.Params {
					args = append(args, "{}")
				}
			}
			src := "(deflava-architecture x\n  :resources ((terraform-data \"r\" :input \"${" + fn + "(" + strings.Join(args, ", ") + ")}\")))"
			want := "in.tlisp:2:15: policy: resource terraform_data.r attribute input: the function " + fn + " is not allowed"
			if got := policyDiagnostics(t, src, policy.Default()); !strings.Contains(got, want) {
				t.Errorf("diagnostics lack %q:\n%s", want, got)
			}
		})
	}
}

// TestCheckPolicy_settings: the allow-list, the resource limit, and a namespace that relaxes
// (provisioners) or tightens (maxResources) the cluster settings.
func TestCheckPolicy_settings(t *testing.T) {
	cfg, err := policy.Parse([]byte(`
cluster:
  maxResources: 3
  allowedProviders: ["registry.opentofu.org/hashicorp/*"]
namespaces:
  relaxed: {allowProvisioners: true, allowedProviders: []}
  tight: {maxResources: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	src := `(deflava-architecture x
  :providers ((testkit :source "example/testkit"))
  :resources ((terraform-data "a" :input "x" :provisioner (:local-exec (:command "true")))
              (terraform-data "b" :input "y")))`
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	for ns, want := range map[string][]string{
		"other": {"source registry.opentofu.org/example/testkit is not in the allowed providers", "a provisioner block is not allowed"},
		"tight": {"the architecture has 2 resource and data source instances (count and for_each expanded); the policy allows at most 1", "not in the allowed providers"},
	} {
		joined := CheckPolicy(in, out, cfg.For(ns)).String()
		for _, w := range want {
			if !strings.Contains(joined, w) {
				t.Errorf("namespace %s: diagnostics lack %q:\n%s", ns, w, joined)
			}
		}
	}
	if got := CheckPolicy(in, out, cfg.For("relaxed")); len(got) > 0 {
		t.Errorf("relaxed namespace refused:\n%s", got)
	}
}

// TestCheckPolicy_impliedProviders: allowedProviders also covers the providers a source uses
// without declaring them in :providers (a local_file with no :providers clause under
// allowedProviders [hashicorp/aws] must not apply): the implied
// hashicorp/<first word of the type>, or the provider a :provider meta-argument names, is
// refused at the resource's line:col unless allowed, also when a plain :provider attribute
// names it (rendered as the provider meta-argument, which the engines read: hashicorp/local
// would run under an allow-list of example/* that way); the built-in
// terraform_data needs no provider; a type whose first word is no provider name is refused by
// the address grammar.
func TestCheckPolicy_impliedProviders(t *testing.T) {
	p := policy.Default()
	p.AllowedProviders = []string{"registry.opentofu.org/hashicorp/aws"}
	tests := []struct {
		name, src string
		want      []string // substrings of the joined diagnostics; none: passes
	}{
		{name: "implied by the type", src: `(deflava-architecture x
  :resources ((terraform-data "ok" :input "a")
              (local-file "x" :filename "/tmp/lava-demo/implied.txt" :content "c")))`,
			want: []string{"in.tlisp:3:15: policy: local_file.x implies provider local (source registry.opentofu.org/hashicorp/local, not declared in :providers), which is not in the allowed providers (registry.opentofu.org/hashicorp/aws)"}},
		{name: "implied by a data source", src: `(deflava-architecture x
  :resources ((terraform-data "ok" :input "a"))
  :data ((http "page" :url "https://example.com")))`,
			want: []string{"http.page implies provider http (source registry.opentofu.org/hashicorp/http"}},
		{name: "a type that names no provider", src: `(deflava-architecture x
  :resources ((..-..-tmp-x "y" :a "b")))`,
			want: []string{"in.tlisp:2:15: policy: .._.._tmp_x.y implies provider ..: provider source \"hashicorp/..\" is not a registry address"}},
		{name: "named by a :provider attribute (the meta-argument the engines read)", src: `(deflava-architecture x
  :resources ((aws-s3-bucket "b" :provider "local" :bucket "n")))`,
			want: []string{"in.tlisp:2:15: policy: aws_s3_bucket.b implies provider local (source registry.opentofu.org/hashicorp/local, not declared in :providers), which is not in the allowed providers"}},
		{name: "an alias named by a :provider attribute", src: `(deflava-architecture x
  :resources ((aws-s3-bucket "b" :provider "google.west" :bucket "n")))`,
			want: []string{"aws_s3_bucket.b implies provider google (source registry.opentofu.org/hashicorp/google"}},
		{name: "a :provider attribute that names no provider", src: `(deflava-architecture x
  :resources ((aws-s3-bucket "b" :provider "../local" :bucket "n")))`,
			want: []string{"aws_s3_bucket.b: the provider meta-argument must name a provider configuration (NAME or NAME.ALIAS)"}},
		{name: "allowed, implied or declared", src: `(deflava-architecture x
  :resources ((terraform-data "ok" :input "a") (aws-s3-bucket "b" :bucket "n")))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			joined := policyDiagnostics(t, tt.src, p)
			if len(tt.want) == 0 && joined != "" {
				t.Fatalf("refused:\n%s", joined)
			}
			for _, w := range tt.want {
				if !strings.Contains(joined, w) {
					t.Errorf("diagnostics lack %q:\n%s", w, joined)
				}
			}
		})
	}
}

// TestCheckPolicy_maxResourcesCountsInstances: maxResources counts the instances :count and
// :for-each render, not the resource forms (three instances under maxResources 1 and a count
// of 9223372036854775807 are refused), and a plain
// :for_each attribute, rendered as the meta-argument past the dialect's typed one, is refused.
func TestCheckPolicy_maxResourcesCountsInstances(t *testing.T) {
	p := policy.Default()
	p.MaxResources = 2
	for name, tc := range map[string]struct{ src, want string }{
		"count": {`(deflava-architecture x
  :resources ((terraform-data "many" :count 3 :input "x")))`, "the architecture has 3 resource and data source instances"},
		"huge count": {`(deflava-architecture x
  :resources ((terraform-data "many" :count 9223372036854775807 :input "x") (terraform-data "one" :input "y")))`, "the architecture has 9223372036854775807 resource and data source instances"},
		"for-each": {`(deflava-architecture x
  :resources ((terraform-data "many" :for-each (:a "1" :b "2" :c "3") :input "x")))`, "the architecture has 3 resource and data source instances"},
		"plain for_each attribute": {`(deflava-architecture x
  :resources ((terraform-data "many" :for_each "${toset([\"a\", \"b\", \"c\"])}" :input "x")))`, "terraform_data.many: a for_each attribute is not allowed: write :for-each"},
		"within the limit": {`(deflava-architecture x
  :resources ((terraform-data "two" :count 2 :input "x")))`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			joined := policyDiagnostics(t, tc.src, p)
			if tc.want == "" && joined != "" {
				t.Fatalf("refused:\n%s", joined)
			}
			if !strings.Contains(joined, tc.want) {
				t.Errorf("diagnostics lack %q:\n%s", tc.want, joined)
			}
		})
	}
}

// TestCheckPolicy_catalogPasses: every bundled architecture passes the default policy, so the
// gate takes nothing away from the catalog.
func TestCheckPolicy_catalogPasses(t *testing.T) {
	checked := 0
	defer func() {
		if checked < 10 {
			t.Errorf("only %d bundled architectures render without bindings", checked)
		}
	}()
	for _, name := range catalog.Names() {
		in := Input{SourceKind: SourceName, SourceName: name}
		out, _ := Synthesize(in)
		if out == nil {
			continue // needs bindings; the catalog tests cover its evaluation
		}
		checked++
		if got := CheckPolicy(in, out, policy.Default()); len(got) > 0 {
			t.Errorf("%s refused by the default policy:\n%s", name, got)
		}
	}
}

// TestCheckPolicy_fileWriteRoots: a local_file resource would write anywhere the applier's
// user may write (docs/security.md, "Engines"). The built-in default (no fileWriteRoots)
// refuses it at the resource form's position; under `fileWriteRoots: [/srv/lava-files]` a
// literal path below the root passes while a template, a "..", a relative path and a path
// outside are refused; `deniedResources` still refuses the type whatever its path.
func TestCheckPolicy_fileWriteRoots(t *testing.T) {
	src := `(deflava-architecture x
  :resources ((local-file "plant" :filename "/var/lib/lava/providers/terraform-provider-pwn" :content "#!/bin/sh" :file-permission "0755")
              (local-file "ok" :filename "/srv/lava-files/team/a.txt" :content "a")
              (local-file "tpl" :filename "${path.module}/../x" :content "a")
              (local-file "dots" :filename "/srv/lava-files/../etc/x" :content "a")
              (local-sensitive-file "rel" :filename "x/../../signing.pub" :content "a")
              (terraform-data "ok" :input "a")))`
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	def := CheckPolicy(in, out, policy.Default()).String()
	for _, w := range []string{
		`in.tlisp:2:15: policy: resource local_file.plant attribute filename: the path "/var/lib/lava/providers/terraform-provider-pwn" is not allowed: the policy sets no fileWriteRoots`,
		`in.tlisp:3:15: policy: resource local_file.ok attribute filename: the path "/srv/lava-files/team/a.txt" is not allowed`,
	} {
		if !strings.Contains(def, w) {
			t.Errorf("the built-in default's diagnostics lack %q:\n%s", w, def)
		}
	}
	cfg, err := policy.Parse([]byte("cluster:\n  fileWriteRoots: [/srv/lava-files]\nnamespaces:\n  locked: {deniedResources: [local_file]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := CheckPolicy(in, out, cfg.For("tenant")).String()
	for _, w := range []string{
		`in.tlisp:2:15: policy: resource local_file.plant attribute filename: the path "/var/lib/lava/providers/terraform-provider-pwn" is outside the allowed directories (fileWriteRoots: /srv/lava-files)`,
		`in.tlisp:4:15: policy: resource local_file.tpl attribute filename: the path "${path.module}/../x" is a template`,
		`in.tlisp:5:15: policy: resource local_file.dots attribute filename: the path "/srv/lava-files/../etc/x" is not clean (want "/srv/etc/x"`,
		`in.tlisp:6:15: policy: resource local_sensitive_file.rel attribute filename: the path "x/../../signing.pub" is relative`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("diagnostics under the roots lack %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "local_file.ok") || strings.Contains(got, "terraform_data.ok") {
		t.Errorf("a path under the root, or terraform_data, refused:\n%s", got)
	}
	if got := CheckPolicy(in, out, cfg.For("locked")).String(); !strings.Contains(got, "in.tlisp:3:15: policy: resource local_file.ok: the local_file resource is not allowed (deniedResources)") {
		t.Errorf("deniedResources does not refuse local_file under a root:\n%s", got)
	}
}

// TestCheckPolicy_addressInjection: a reference's attribute and an import address become
// expressions in the rendered JSON, so the policy gate accepts only static addresses there
// (whatever the admin relaxed) and names the form's file:line:col; the attack sources (a "}"
// closing the reference's ${} before a file() call; a call in an import's index) are
// refused, and static addresses pass.
func TestCheckPolicy_addressInjection(t *testing.T) {
	relaxed := policy.Default()
	relaxed.DeniedFunctions = nil
	tests := []struct{ name, src, want string }{
		{"reference attribute", `(deflava-architecture x
  :resources ((terraform-data "x" :input "a"))
  :outputs (:leak (ref terraform-data "x" "id}${file(\"/seed\")")))`,
			`in.tlisp:3:13: policy: output leak reference "terraform_data.x.id}${file(\"/seed\")" is not a static address`},
		{"import address", `(deflava-architecture x
  :resources ((terraform-data "a" :input "x" :for-each (:k "v"))
              (import "terraform_data.a[file(\"/key\")]" "whatever")))`,
			`in.tlisp:1:1: policy: import address "terraform_data.a[file(\"/key\")]" is not a static address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{SourceKind: SourceInline, SourceText: []byte(tt.src), File: "in.tlisp"}
			out, ds := Synthesize(in)
			if out == nil {
				t.Fatalf("synthesize: %v", errorsOf(ds))
			}
			for _, p := range []policy.Policy{policy.Default(), relaxed} {
				if got := CheckPolicy(in, out, p).String(); !strings.Contains(got, tt.want) {
					t.Fatalf("diagnostics lack %q:\n%s", tt.want, got)
				}
			}
		})
	}
	ok := `(deflava-architecture x
  :resources ((terraform-data "a" :input "x" :for-each (:k "v"))
              (import "terraform_data.a[\"k\"]" "id"))
  :outputs (:o (ref terraform-data "a" "output")))`
	in := Input{SourceKind: SourceInline, SourceText: []byte(ok), File: "in.tlisp"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	if got := CheckPolicy(in, out, policy.Default()); len(got) > 0 {
		t.Fatalf("static addresses refused: %s", got.String())
	}
}

// policyDiagnostics synthesizes the inline source src (file in.tlisp, no bindings) and returns
// the policy violations of p, joined as CheckPolicy's diagnostics print them.
func policyDiagnostics(t *testing.T, src string, p policy.Policy) string {
	t.Helper()
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp"}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	return CheckPolicy(in, out, p).String()
}

// TestCheckPolicy_secretInAPath: a Secret binding in a file path makes the path a template
// (its value is rendered marked sensitive), which the policy refuses; the violation shows
// "(sensitive value)" where the value stands, never the value or the part of it that fits
// before the message clips a long path (such as "tok-1c2d3e4f-never-…"). Every form
// SensitiveTemplate writes is recognised.
func TestCheckPolicy_secretInAPath(t *testing.T) {
	const token = "tok-1c2d3e4f-never-in-events-0123456789"
	src := `(deflava-architecture p
  :inputs ((:token ""))
  :providers ((testkit :source "example/testkit"))
  :resources ((testkit-file "f" :filename "/tmp/lava-demo/a-rather-long-directory-name-to-clip/{token}.txt" :content "x")))`
	in := Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp",
		Bindings: tlisp.Bindings{Scalars: map[string]string{"token": token}}, SecretKeys: []string{"token"}, BindingsKey: make([]byte, 32)}
	out, ds := Synthesize(in)
	if out == nil {
		t.Fatalf("synthesize: %v", errorsOf(ds))
	}
	got := CheckPolicy(in, out, policy.Policy{FileWriteRoots: []string{"/tmp/lava-demo"}}).String()
	if !strings.Contains(got, "is a template") || !strings.Contains(got, "(sensitive value)") {
		t.Errorf("diagnostics %q, want the path refused as a template with (sensitive value) in it", got)
	}
	if strings.Contains(got, token[:8]) {
		t.Errorf("diagnostics show part of the secret: %s", got)
	}
	for _, v := range []string{"", "plain", `q"uo\te`, "new\nline\ttab", "${file(\"/x\")} %{ if true }", "ünï\u00adcode\u2028", `\"`, `$`, `"}`} {
		if got := policy.HideSensitive("<" + SensitiveTemplate(v) + ">"); got != "<(sensitive value)>" {
			t.Errorf("HideSensitive(SensitiveTemplate(%q)) = %q", v, got)
		}
	}
}

// TestSynthesize_manySequencesAndReferences: a string of 100,000 "${ }" sequences and 200,000
// "{e}" references, in a loop of four passes, within MaxValues. Checking whether each
// reference stood inside a sequence scanned every sequence: 11.5 s a pass; the check walks
// the sequences once per string. A watchdog far above the time it takes catches the old
// behaviour. The 400,000 sequences rendered are then refused (hclnest.MaxSequences).
func TestSynthesize_manySequencesAndReferences(t *testing.T) {
	src := `(deflava-architecture x :inputs ((:e "") (:l ("a" "b" "c" "d")))
  :resources ((for-each ((i it) (enumerate l)) (terraform-data "r{i}" :input "` + strings.Repeat("${ }", 100_000) + strings.Repeat("{e}", 200_000) + `"))))`
	done := make(chan error, 1)
	go func() {
		_, ds := Synthesize(Input{SourceKind: SourceInline, SourceText: []byte(src), File: "in.tlisp"})
		if errs := errorsOf(ds); len(errs) != 1 || !strings.Contains(errs[0], "more than 100000 template sequences") {
			done <- fmt.Errorf("synthesize: %v; want the evaluation through and the sequences refused", errs)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still synthesizing after 30s")
	}
}
