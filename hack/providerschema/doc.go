// Command providerschema derives a provider schema, shaped like a subset of `tofu providers
// schema -json`, from the jsii assembly of a CDK-for-Terraform prebuilt provider package (the
// `.jsii` file of an npm package such as @cdktf/provider-cloudflare). The catalog tests
// validate every bundled architecture against these schemas (internal/lang/catalog/testdata/
// providerschemas/README.md has the packages, their versions and the regenerate command):
//
//	go run ./hack/providerschema -assembly package/.jsii -package-json package/package.json \
//	    -types-file types.txt -o cloudflare.json.gz
//
// -assembly reads a plain or gzipped assembly: a file starting with the gzip magic, or a
// `.jsii` whose "schema" is "jsii/file-redirect" pointing at a compressed `.jsii.gz` (jsii's
// compressed-assembly convention). -package-json gives the package name and version and the
// provider address and version it was generated from (its "cdktf" field). -types-file lists
// the resource and data source types to write, one a line ("resource aws_iam_role", "data
// aws_iam_policy_document", "provider" for the provider configuration); -all writes every type.
// Whatever is selected, the output also lists the names of every resource and data source type
// of the provider, so a consumer can tell an unknown type from one that was left out. -o names
// the output (gzipped when it ends in ".gz"; standard output when absent).
//
// # Derivation
//
//   - A class whose base is cdktf.TerraformResource (cdktf.TerraformDataSource,
//     cdktf.TerraformProvider) is a resource (data source, the provider configuration). Its type
//     name is the last word of the `{@link URL NAME}` in its summary ("Represents a {@link ...
//     cloudflare_dns_record}"); its configuration is the datatype interface its initializer's
//     "config" parameter names (XxxConfig). The meta-arguments it inherits
//     (cdktf.TerraformMetaArguments: count, for_each, provider, lifecycle, depends_on) are not
//     listed.
//   - Each property of a configuration is an attribute or a nested block. Its name is the anchor
//     of the "Docs at Terraform Registry" link in its remarks ("...#zone_id DnsRecord#zone_id"
//     gives zone_id), else the property name turned from camelCase to snake_case. A property
//     without "optional" is required, one with it optional.
//   - A property whose type is a primitive, or a list or map of primitives, is an attribute:
//     string → "string", number → "number", boolean → "bool", any and json → "dynamic", an
//     array → ["list", T], a map → ["map", T] (a map of any → "dynamic"). A union with
//     cdktf.IResolvable is its other member. The provider configuration's "alias" is a
//     meta-argument and is left out.
//   - A property whose type is another datatype interface (or an array or a map of one, in a
//     union with cdktf.IResolvable) is nested. cdktf writes the summary "NAME block." for a
//     block (SDKv2 providers): it becomes a block_types entry, nesting "list", with max_items 1
//     when it is a single struct and min_items 1 when it is required. Any other nested property
//     is a nested attribute (the plugin framework's, e.g. Cloudflare v5): "nested_type" with
//     nesting "single" (a struct), "list" (an array) or "map" (a map), its attributes derived
//     the same way.
//
// # Limits
//
//   - Sets are lists: jsii has no set type, so a set of strings is ["list","string"] and a set
//     block is nesting "list".
//   - Computed-only attributes are not in a configuration and are not written; "computed" is
//     never set. Optional+computed attributes are optional.
//   - An object-typed attribute that is not nested (an SDKv2 map of objects) is "dynamic" only
//     when jsii says any; maximum item counts other than 1 and minimum counts other than those
//     above are not in the assembly and are not written.
//   - The block-versus-nested-attribute split rests on cdktf's "NAME block." summary.
//   - cdktf makes every argument and block of a provider configuration optional (a provider
//     may read them from its environment), so a provider's required configuration (azurerm's
//     features block) is not in the derived schema.
//
// Exit status: 0 on success, 1 when a listed type is not in the assembly (the others are still
// written) or the input cannot be read, 2 for bad usage.
package main
