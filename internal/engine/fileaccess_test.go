package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/lava-operator/lava/internal/lang/policy"
)

// schemaSet is provider schemas written out as a provider returns them (test/provider/testkit,
// hashicorp/local, hashicorp/archive), by provider local name.
type schemaSet map[string]struct {
	addr      string
	resources map[string]*FileBlock
	data      map[string]*FileBlock
}

func (s schemaSet) FileSchema(_ context.Context, ref string, kind SchemaKind, typ string) (string, *FileBlock, error) {
	local, _, _ := strings.Cut(ref, ".")
	p, ok := s[local]
	if !ok {
		return "", nil, fmt.Errorf("no provider %s", local)
	}
	if kind == DataSchema {
		return p.addr, p.data[typ], nil
	}
	return p.addr, p.resources[typ], nil
}

func str(required bool) *FileAttribute { return &FileAttribute{Type: cty.String, Required: required} }

func testSchemas() schemaSet {
	file := func() *FileBlock {
		return &FileBlock{Attributes: map[string]*FileAttribute{"filename": str(true), "content": str(true), "mode": str(false),
			"tags": {Type: cty.Map(cty.String)}}}
	}
	archive := &FileBlock{Attributes: map[string]*FileAttribute{"output_path": str(true), "source_file": str(false), "source_dir": str(false),
		"excludes": {Type: cty.Set(cty.String)}},
		Blocks: map[string]*FileBlock{"source": {Attributes: map[string]*FileAttribute{"content": str(true), "filename": str(true)}}}}
	return schemaSet{
		"testkit": {addr: "registry.opentofu.org/example/testkit", resources: map[string]*FileBlock{"testkit_file": file(), "testkit_legacy_file": file()}},
		"local": {addr: "registry.opentofu.org/hashicorp/local", resources: map[string]*FileBlock{"local_file": {Attributes: map[string]*FileAttribute{
			"filename": str(true), "content": str(false), "source": str(false)}}},
			data: map[string]*FileBlock{"local_file": {Attributes: map[string]*FileAttribute{"filename": str(true), "content": {Type: cty.String}}}}},
		"archive": {addr: "registry.opentofu.org/hashicorp/archive", resources: map[string]*FileBlock{"archive_file": archive}},
		"kit": {addr: "registry.opentofu.org/example/kit", resources: map[string]*FileBlock{"kit_thing": {
			Attributes: map[string]*FileAttribute{"name": str(true), "mounts": {Nested: &FileBlock{Keyed: true,
				Attributes: map[string]*FileAttribute{"host_path": str(false)}}}, "search_paths": {Type: cty.List(cty.String)}},
			Blocks: map[string]*FileBlock{"volume": {Attributes: map[string]*FileAttribute{"config_file": str(false)}}}}}},
		"terraform": {addr: "terraform.io/builtin/terraform", resources: map[string]*FileBlock{"terraform_data": {
			Attributes: map[string]*FileAttribute{"input": {Type: cty.DynamicPseudoType}}}}},
	}
}

// TestFileAccess_check: every path attribute the schemas declare (the name rule and the
// explicit model), nested ones and dynamic blocks' included, and every import id of a type that
// takes a path, is held to the roots its access allows, never reaches a protected directory
// (as written or through a symbolic link), and stays under the roots once links are resolved.
// Each refused case is one attack; each passing case a configuration that must keep working.
func TestFileAccess_check(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, read, mirror, stateDir, outside := filepath.Join(base, "files"), filepath.Join(base, "read"),
		filepath.Join(base, "mirror"), filepath.Join(base, "state"), filepath.Join(base, "outside")
	for _, d := range []string{root, read, mirror, stateDir, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seed := filepath.Join(stateDir, "nats-credentials", "bootstrap.nk")
	for l, target := range map[string]string{"to-state": stateDir, "to-outside": outside, "dangling": filepath.Join(outside, "gone", "x")} {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	fa := &FileAccess{
		Policy: &policy.File{Default: policy.Config{Cluster: policy.Settings{FileWriteRoots: &[]string{root}, FileReadRoots: &[]string{read}},
			// A namespace whose roots hold the state directory (a policy changed after
			// start): the protected directories stay out all the same.
			Namespaces: map[string]policy.Settings{"wide": {FileWriteRoots: &[]string{base}}}}},
		Protected: []string{mirror, stateDir},
	}
	res := func(typ, name string, attrs string) string {
		return fmt.Sprintf(`{"resource":{%q:{%q:{%s}}}}`, typ, name, attrs)
	}
	for _, tc := range []struct {
		name, ns, doc string
		want          []string // substrings of the violations; none: passes
	}{
		{name: "legacy file outside the roots", doc: res("testkit_legacy_file", "x", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(outside, "x"))),
			want: []string{"resource testkit_legacy_file.x attribute filename: the path", "is outside the allowed directories (fileWriteRoots: " + root + ")",
				"Lava does not know which paths of registry.opentofu.org/example/testkit testkit_legacy_file are only read"}},
		{name: "legacy file under the root", doc: res("testkit_legacy_file", "x", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(root, "a", "x")))},
		{name: "file planted in the mirror", ns: "wide", doc: res("testkit_file", "p", fmt.Sprintf(`"filename":%q,"content":"#!/bin/sh"`,
			filepath.Join(mirror, "registry.opentofu.org", "example", "testkit", "0.4.0", "linux_amd64", "terraform-provider-testkit"))),
			want: []string{"reaches " + mirror + ", which Lava keeps"}},
		{name: "file through a link into the state directory", doc: res("testkit_file", "l", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(root, "to-state", "signing.key"))),
			want: []string{"reaches " + stateDir}},
		{name: "file through a link outside the roots", doc: res("testkit_file", "o", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(root, "to-outside", "x"))),
			want: []string{"resolves through a symbolic link to " + filepath.Join(outside, "x")}},
		{name: "file through a dangling link", doc: res("testkit_file", "d", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(root, "dangling"))),
			want: []string{"cannot be resolved"}},
		{name: "a template", doc: res("testkit_file", "t", `"filename":"${path.module}/x","content":"x"`), want: []string{"is a template"}},
		{name: "a directory holding the state directory", ns: "wide", doc: res("archive_file", "a", fmt.Sprintf(`"output_path":%q,"source_dir":%q`, filepath.Join(root, "a.zip"), base)),
			want: []string{"attribute source_dir: the path", "reaches " + mirror}},
		{name: "a read under the read root", doc: res("local_file", "c", fmt.Sprintf(`"filename":%q,"source":%q`, filepath.Join(root, "c"), filepath.Join(read, "in")))},
		{name: "a write under the read root", doc: res("local_file", "w", fmt.Sprintf(`"filename":%q,"content":"x"`, filepath.Join(read, "w"))),
			want: []string{"resource local_file.w attribute filename", "outside the allowed directories (fileWriteRoots: " + root + ")"}},
		{name: "a data source reads outside", doc: fmt.Sprintf(`{"data":{"local_file":{"seed":{"filename":%q}}}}`, seed),
			want: []string{"data source local_file.seed attribute filename", "reaches " + stateDir}},
		{name: "a name inside an archive is no file", doc: res("archive_file", "n", fmt.Sprintf(`"output_path":%q,"source":[{"content":"x","filename":"../../etc/x"}]`, filepath.Join(root, "n.zip")))},
		{name: "nested, keyed, listed and dynamic paths", doc: res("kit_thing", "k", fmt.Sprintf(
			`"name":"k","mounts":{"a":{"host_path":%q}},"search_paths":[%q,"/etc"],"dynamic":{"volume":{"for_each":["x"],"content":{"config_file":"/etc/kit.conf"}}}`,
			filepath.Join(root, "m"), filepath.Join(root, "s"))),
			want: []string{"attribute search_paths: the path \"/etc\"", "attribute volume.config_file: the path \"/etc/kit.conf\""}},
		{name: "a nested map path outside", doc: res("kit_thing", "m", `"name":"k","mounts":{"a":{"host_path":"/var/run/secrets/token"}}`),
			want: []string{"attribute mounts.host_path: the path \"/var/run/secrets/token\""}},
		{name: "a bundled module", doc: fmt.Sprintf(`{"//":{"lava_modules":{"modules/m":{"resource":{"testkit_file":{"f":{"filename":%q,"content":"x"}}}}}}}`, seed),
			want: []string{"module modules/m: resource testkit_file.f attribute filename"}},
		{name: "an import id naming a seed", doc: fmt.Sprintf(`{"import":[{"to":"testkit_file.i","id":%q}],"resource":{"testkit_file":{"i":{"filename":%q,"content":"x"}}}}`,
			seed, filepath.Join(root, "i")),
			want: []string{"import of testkit_file.i (testkit_file takes a path: its required attribute filename): the id", "reaches " + stateDir}},
		{name: "an import identity outside", doc: fmt.Sprintf(`{"import":{"to":"module.m[0].testkit_file.i","identity":{"filename":%q}}}`, filepath.Join(outside, "f")),
			want: []string{"the identity's filename", "outside the allowed directories"}},
		{name: "an import id under the root", doc: fmt.Sprintf(`{"import":[{"to":"testkit_file.i","id":%q}]}`, filepath.Join(root, "i"))},
		{name: "an import of a type without a path", doc: `{"import":[{"to":"terraform_data.d","id":"/etc/passwd"}]}`},
		{name: "terraform_data", doc: res("terraform_data", "d", `"input":{"path":"/etc/passwd"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "tenant"
			}
			err := fa.Check(t.Context(), ns, []byte(tc.doc), testSchemas())
			var fe *FileAccessError
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &fe) || !errors.Is(err, ErrPolicyRejected) {
				t.Fatalf("Check = %v, want a FileAccessError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nlacks %q", err, w)
				}
			}
		})
	}
	if err := (*FileAccess)(nil).Check(t.Context(), "x", []byte(res("testkit_file", "x", `"filename":"/etc/x"`)), testSchemas()); err != nil {
		t.Errorf("a nil FileAccess checked: %v", err)
	}
}

// TestFileAccess_checkRoots: a root that is, holds or lies in a protected directory (also
// through a symbolic link) is refused at start, naming where it is set; disjoint roots pass.
func TestFileAccess_checkRoots(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mirror, stateDir, files := filepath.Join(base, "mirror"), filepath.Join(base, "state"), filepath.Join(base, "files")
	for _, d := range []string{mirror, stateDir, files} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(stateDir, link); err != nil {
		t.Fatal(err)
	}
	check := func(doc string) error {
		cfg, err := policy.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return (&FileAccess{Policy: &policy.File{Default: cfg}, Protected: []string{mirror, stateDir}}).CheckRoots()
	}
	for doc, want := range map[string]string{
		fmt.Sprintf("cluster: {fileWriteRoots: [%s]}", mirror):            "cluster.fileWriteRoots: " + mirror + " overlaps " + mirror,
		fmt.Sprintf("cluster: {fileReadRoots: [%s/keys]}", stateDir):      "cluster.fileReadRoots: " + stateDir + "/keys overlaps " + stateDir,
		fmt.Sprintf("namespaces: {t: {fileWriteRoots: [%s]}}", base):      "namespaces.t.fileWriteRoots: " + base + " overlaps",
		fmt.Sprintf("cluster: {fileWriteRoots: [%s, %s/x]}", files, link): "cluster.fileWriteRoots: " + link + "/x overlaps " + stateDir,
		"cluster: {fileWriteRoots: [/]}":                                  "cluster.fileWriteRoots: / overlaps",
	} {
		if err := check(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if err := check(fmt.Sprintf("cluster: {fileWriteRoots: [%s], fileReadRoots: [%s/in]}", files, files)); err != nil {
		t.Errorf("disjoint roots refused: %v", err)
	}
}
