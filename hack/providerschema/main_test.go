package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tinyAssembly is a jsii assembly with one provider, one resource (an SDKv2-style block, a
// framework-style nested attribute, every attribute type) and one data source.
const tinyAssembly = `{"name": "@cdktf/provider-x", "types": {
 "x.provider.XProvider": {"kind": "class", "base": "cdktf.TerraformProvider",
  "docs": {"summary": "Represents a {@link https://example.invalid/docs x}."},
  "initializer": {"parameters": [{"name": "scope", "type": {"fqn": "constructs.Construct"}}, {"name": "config", "type": {"fqn": "x.provider.XProviderConfig"}}]}},
 "x.provider.XProviderConfig": {"kind": "interface", "datatype": true, "properties": [
  {"name": "alias", "optional": true, "type": {"primitive": "string"}},
  {"name": "apiToken", "optional": true, "type": {"primitive": "string"}}]},
 "x.thing.Thing": {"kind": "class", "base": "cdktf.TerraformResource",
  "docs": {"summary": "Represents a {@link https://example.invalid/docs/resources/thing x_thing}."},
  "initializer": {"parameters": [{"name": "config", "type": {"fqn": "x.thing.ThingConfig"}}]}},
 "x.thing.ThingConfig": {"kind": "interface", "datatype": true, "properties": [
  {"name": "zoneId", "docs": {"remarks": "Docs at Terraform Registry: {@link https://example.invalid/docs/resources/thing#zone_id Thing#zone_id}"}, "type": {"primitive": "string"}},
  {"name": "ttl", "optional": true, "type": {"primitive": "number"}},
  {"name": "proxied", "optional": true, "type": {"union": {"types": [{"primitive": "boolean"}, {"fqn": "cdktf.IResolvable"}]}}},
  {"name": "tags", "optional": true, "type": {"collection": {"kind": "map", "elementtype": {"primitive": "string"}}}},
  {"name": "ports", "optional": true, "type": {"collection": {"kind": "array", "elementtype": {"primitive": "number"}}}},
  {"name": "extra", "optional": true, "type": {"primitive": "any"}},
  {"name": "rule", "docs": {"summary": "rule block."}, "type": {"union": {"types": [{"fqn": "cdktf.IResolvable"}, {"collection": {"kind": "array", "elementtype": {"fqn": "x.thing.ThingRule"}}}]}}},
  {"name": "timeouts", "optional": true, "docs": {"summary": "timeouts block."}, "type": {"fqn": "x.thing.ThingTimeouts"}},
  {"name": "data", "optional": true, "docs": {"summary": "Record data."}, "type": {"fqn": "x.thing.ThingData"}}]},
 "x.thing.ThingRule": {"kind": "interface", "datatype": true, "properties": [{"name": "action", "type": {"primitive": "string"}}]},
 "x.thing.ThingTimeouts": {"kind": "interface", "datatype": true, "properties": [{"name": "create", "optional": true, "type": {"primitive": "string"}}]},
 "x.thing.ThingData": {"kind": "interface", "datatype": true, "properties": [{"name": "keyTag", "optional": true, "type": {"primitive": "number"}}]},
 "x.dataX.DataXLookup": {"kind": "class", "base": "cdktf.TerraformDataSource",
  "docs": {"summary": "Represents a {@link https://example.invalid/docs/data-sources/lookup x_lookup}."},
  "initializer": {"parameters": [{"name": "config", "type": {"fqn": "x.dataX.DataXLookupConfig"}}]}},
 "x.dataX.DataXLookupConfig": {"kind": "interface", "datatype": true, "properties": [{"name": "name", "type": {"primitive": "string"}}]}
}}`

const tinyPackage = `{"name": "@cdktf/provider-x", "version": "1.2.3", "cdktf": {"provider": {"name": "example.invalid/acme/x", "version": "5.14.0"}}}`

func writeFixture(t *testing.T, gzipped bool) (string, string) {
	t.Helper()
	dir := t.TempDir()
	asm := []byte(tinyAssembly)
	if gzipped {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(asm)
		zw.Close()
		if err := os.WriteFile(filepath.Join(dir, ".jsii.gz"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		asm = []byte(`{"schema": "jsii/file-redirect", "compression": "gzip", "filename": ".jsii.gz"}`)
	}
	for name, b := range map[string][]byte{".jsii": asm, "package.json": []byte(tinyPackage),
		"types.txt": []byte("provider\nresource x_thing\ndata x_lookup\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, ".jsii")
}

func TestRun_derivesSchema(t *testing.T) {
	for _, gz := range []bool{false, true} {
		dir, asm := writeFixture(t, gz)
		var stdout, stderr bytes.Buffer
		if rc := run([]string{"-assembly", asm, "-package-json", filepath.Join(dir, "package.json"), "-types-file", filepath.Join(dir, "types.txt")}, &stdout, &stderr); rc != 0 {
			t.Fatalf("gzip=%v: exit %d: %s", gz, rc, stderr.String())
		}
		var got map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		if err := json.Unmarshal([]byte(`{"format_version": "1.0",
 "lava": {"package": "@cdktf/provider-x", "package_version": "1.2.3", "provider_version": "5.14.0",
  "resource_types": ["x_thing"], "data_source_types": ["x_lookup"]},
 "provider_schemas": {"example.invalid/acme/x": {
  "provider": {"version": 0, "block": {"attributes": {"api_token": {"type": "string", "optional": true}}}},
  "resource_schemas": {"x_thing": {"version": 0, "block": {
   "attributes": {
    "zone_id": {"type": "string", "required": true},
    "ttl": {"type": "number", "optional": true},
    "proxied": {"type": "bool", "optional": true},
    "tags": {"type": ["map", "string"], "optional": true},
    "ports": {"type": ["list", "number"], "optional": true},
    "extra": {"type": "dynamic", "optional": true},
    "data": {"nested_type": {"attributes": {"key_tag": {"type": "number", "optional": true}}, "nesting_mode": "single"}, "optional": true}},
   "block_types": {
    "rule": {"nesting_mode": "list", "block": {"attributes": {"action": {"type": "string", "required": true}}}, "min_items": 1},
    "timeouts": {"nesting_mode": "list", "block": {"attributes": {"create": {"type": "string", "optional": true}}}, "max_items": 1}}}}},
  "data_source_schemas": {"x_lookup": {"version": 0, "block": {"attributes": {"name": {"type": "string", "required": true}}}}}}}}`), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("gzip=%v: schema (-want +got):\n%s", gz, diff)
		}
	}
}

func TestRun_missingTypeAndUsage(t *testing.T) {
	dir, asm := writeFixture(t, false)
	types := filepath.Join(dir, "more.txt")
	if err := os.WriteFile(types, []byte("resource x_thing\nresource x_gone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.json.gz")
	var stdout, stderr bytes.Buffer
	rc := run([]string{"-assembly", asm, "-package-json", filepath.Join(dir, "package.json"), "-types-file", types, "-o", out}, &stdout, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), "providerschema: resource x_gone is not in @cdktf/provider-x 1.2.3") {
		t.Errorf("exit %d, stderr %q; want 1 naming x_gone", rc, stderr.String())
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("output %s not written gzipped: %v", out, err)
	}
	if rc := run([]string{"-assembly", asm}, &stdout, &stderr); rc != 2 {
		t.Errorf("usage error: exit %d, want 2", rc)
	}
}
