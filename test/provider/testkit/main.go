// Command terraform-provider-testkit is a test-only Terraform provider (example/testkit 0.4.0)
// whose resource testkit_file is a file on the local disk that tests can change out of band to
// cause every class of drift (docs/dialect.md section 6.1):
//
//	resource "testkit_file" "a" {
//	  filename        = "/tmp/a.txt"    # required; a change replaces the resource
//	  content         = "hello"         # required; updated in place, read back from the file
//	  mode            = "0644"          # optional (default "0644"); a change REPLACES the
//	                                    # resource; read back from the file's permission bits
//	  tags            = { owner = "x" } # optional; updated in place; kept in the sidecar file
//	                                    # "<filename>.tags.json" and read back from it
//	  fail_on_create  = false           # optional; Create fails on purpose
//	  fail_on_update  = false           # optional; Update fails on purpose
//	  create_delay_ms = 0               # optional; Create waits first (cancellable)
//	}
//
// Read reports what is on disk: a missing file removes the resource from state (a create:
// functional drift), other content is an in-place update (functional), other permission bits
// are a replacement (critical), other tags in the sidecar an update under "tags." (cosmetic).
// The id is the SHA-1 of the filename. Delete removes the file and its sidecar.
//
// Resource identity (plugin protocol 6.9): testkit_file's identity is its filename. Plan sets
// the planned identity whenever the filename is known (a create included), Create, Read and
// Update return it, and import takes either the filename as the import id or the identity
// (ImportStatePassthroughWithIdentity). testkit_legacy_file is the same file resource without
// an identity, like a provider built before protocol 5.9/6.9, and without import.
//
// Fault knobs for reliability tests, all files next to the resource's file:
//
//   - "<filename>.creates" counts the successful Creates of that filename (a decimal number,
//     kept by Delete), so a test can assert that nothing was created twice;
//   - "<filename>.create-started" is written when a Create starts (before create_delay_ms), so
//     a test can act while a create is in flight;
//   - while "<filename>.fail-read" exists, Read fails with an error diagnostic;
//   - while "<filename>.fail-delete" exists, Delete fails with an error diagnostic.
//
// Version 0.1.0 (built by hack/tools/build-tofu.sh) had content force replacement and no mode
// or tags; 0.2.0 added mode and tags; 0.3.0 the fault knobs; 0.4.0 is this file (resource
// identity, import and testkit_legacy_file), built by test/provider/testkit/build.sh.
package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Version is the provider version this source builds.
const Version = "0.4.0"

// defaultMode is the mode of a file whose configuration sets none.
const defaultMode = "0644"

var modePattern = regexp.MustCompile(`^0[0-7]{3}$`)

type prov struct{}

func (prov) Metadata(_ context.Context, _ provider.MetadataRequest, r *provider.MetadataResponse) {
	r.TypeName, r.Version = "testkit", Version
}

func (prov) Schema(_ context.Context, _ provider.SchemaRequest, r *provider.SchemaResponse) {
	r.Schema = pschema.Schema{}
}

func (prov) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (prov) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return idFileRes{fileRes{name: "_file"}} },
		func() resource.Resource { return fileRes{name: "_legacy_file"} },
	}
}

func (prov) DataSources(context.Context) []func() datasource.DataSource { return nil }

// fileRes is testkit_legacy_file (name "_legacy_file"): no identity, no import. idFileRes
// adds both for testkit_file.
type fileRes struct{ name string }

// idFileRes is testkit_file: fileRes with a resource identity (the filename) and import.
type idFileRes struct{ fileRes }

// fileIdentity is testkit_file's identity.
type fileIdentity struct {
	Filename types.String `tfsdk:"filename"`
}

func (idFileRes) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, r *resource.IdentitySchemaResponse) {
	r.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"filename": identityschema.StringAttribute{RequiredForImport: true, Description: "the file's path"},
	}}
}

// ImportState takes the filename as the import id or as the identity.
func (idFileRes) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughWithIdentity(ctx, path.Root("filename"), path.Root("filename"), req, resp)
}

// ModifyPlan sets the planned identity once the filename is known, so a client can record it
// before a create.
func (idFileRes) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || resp.Identity == nil {
		return
	}
	var name types.String
	if resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("filename"), &name)...); resp.Diagnostics.HasError() {
		return
	}
	if name.IsUnknown() || name.IsNull() {
		return
	}
	resp.Diagnostics.Append(resp.Identity.Set(ctx, fileIdentity{Filename: name})...)
}

// setIdentity records m's identity in a response's identity (nil for testkit_legacy_file).
func setIdentity(ctx context.Context, id *tfsdk.ResourceIdentity, m *fileModel) diag.Diagnostics {
	if id == nil {
		return nil
	}
	return id.Set(ctx, fileIdentity{Filename: m.Filename})
}

type fileModel struct {
	ID           types.String `tfsdk:"id"`
	Filename     types.String `tfsdk:"filename"`
	Content      types.String `tfsdk:"content"`
	Mode         types.String `tfsdk:"mode"`
	Tags         types.Map    `tfsdk:"tags"`
	FailOnCreate types.Bool   `tfsdk:"fail_on_create"`
	FailOnUpdate types.Bool   `tfsdk:"fail_on_update"`
	DelayMS      types.Int64  `tfsdk:"create_delay_ms"`
}

func (f fileRes) Metadata(_ context.Context, req resource.MetadataRequest, r *resource.MetadataResponse) {
	r.TypeName = req.ProviderTypeName + f.name
}

func (fileRes) Schema(_ context.Context, _ resource.SchemaRequest, r *resource.SchemaResponse) {
	rr := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	r.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":       schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"filename": schema.StringAttribute{Required: true, PlanModifiers: rr},
		"content":  schema.StringAttribute{Required: true},
		"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMode),
			PlanModifiers: rr, Description: `permission bits as four octal digits ("0644"); a change replaces the file`},
		"tags":            schema.MapAttribute{Optional: true, ElementType: types.StringType},
		"fail_on_create":  schema.BoolAttribute{Optional: true},
		"fail_on_update":  schema.BoolAttribute{Optional: true},
		"create_delay_ms": schema.Int64Attribute{Optional: true},
	}}
}

func idOf(filename string) string { h := sha1.Sum([]byte(filename)); return hex.EncodeToString(h[:]) }

func sidecar(filename string) string { return filename + ".tags.json" }

// Fault knob files next to a resource's file (see the package comment).
func createsFile(filename string) string       { return filename + ".creates" }
func createStartedFile(filename string) string { return filename + ".create-started" }
func failReadFile(filename string) string      { return filename + ".fail-read" }
func failDeleteFile(filename string) string    { return filename + ".fail-delete" }

// exists reports whether a knob file is present.
func exists(name string) bool { _, err := os.Stat(name); return err == nil }

// countCreate adds one to the create counter of filename.
func countCreate(filename string) error {
	n := 0
	if b, err := os.ReadFile(createsFile(filename)); err == nil {
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("create counter %s: %w", createsFile(filename), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.WriteFile(createsFile(filename), []byte(strconv.Itoa(n+1)+"\n"), 0o644)
}

// parseMode parses "0644" into permission bits.
func parseMode(s string) (fs.FileMode, error) {
	if !modePattern.MatchString(s) {
		return 0, fmt.Errorf("mode %q is not four octal digits such as \"0644\"", s)
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, err
	}
	return fs.FileMode(n), nil
}

// write makes the disk match m: content, mode and the tags sidecar.
func write(ctx context.Context, m *fileModel) error {
	mode, err := parseMode(m.Mode.ValueString())
	if err != nil {
		return err
	}
	name := m.Filename.ValueString()
	if err := os.WriteFile(name, []byte(m.Content.ValueString()), mode); err != nil {
		return err
	}
	if err := os.Chmod(name, mode); err != nil { // WriteFile keeps an existing file's mode and obeys the umask
		return err
	}
	if m.Tags.IsNull() || m.Tags.IsUnknown() {
		if err := os.Remove(sidecar(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tags := map[string]string{}
	if d := m.Tags.ElementsAs(ctx, &tags, false); d.HasError() {
		return fmt.Errorf("tags: %v", d)
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return err
	}
	return os.WriteFile(sidecar(name), b, 0o644)
}

func (fileRes) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if err := os.WriteFile(createStartedFile(m.Filename.ValueString()), nil, 0o644); err != nil {
		resp.Diagnostics.AddError("create-started marker", err.Error())
		return
	}
	if d := m.DelayMS.ValueInt64(); d > 0 {
		select {
		case <-time.After(time.Duration(d) * time.Millisecond):
		case <-ctx.Done():
			resp.Diagnostics.AddError("cancelled", ctx.Err().Error())
			return
		}
	}
	if m.FailOnCreate.ValueBool() {
		resp.Diagnostics.AddError("testkit: fail_on_create", "create failed on purpose for "+m.Filename.ValueString())
		return
	}
	if err := write(ctx, &m); err != nil {
		resp.Diagnostics.AddError("write", err.Error())
		return
	}
	if err := countCreate(m.Filename.ValueString()); err != nil {
		resp.Diagnostics.AddError("count create", err.Error())
		return
	}
	m.ID = types.StringValue(idOf(m.Filename.ValueString()))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, &m)...)
}

func (fileRes) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	name := m.Filename.ValueString()
	if exists(failReadFile(name)) {
		resp.Diagnostics.AddError("testkit: fail-read", "read failed on purpose for "+name+" ("+failReadFile(name)+" exists)")
		return
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		// The framework requires an identity after every Read of a resource with one, a
		// removal included, unless the client sent the current identity; a client that stores
		// none (OpenTofu, Lava's refresh) would otherwise get "Missing Resource Identity After
		// Read" for a file deleted out of band.
		resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, &m)...)
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("read", err.Error())
		return
	}
	st, err := os.Stat(name)
	if err != nil {
		resp.Diagnostics.AddError("stat", err.Error())
		return
	}
	m.Content = types.StringValue(string(b))
	m.Mode = types.StringValue(fmt.Sprintf("%04o", st.Mode().Perm()))
	tb, err := os.ReadFile(sidecar(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.Tags = types.MapNull(types.StringType)
	case err != nil:
		resp.Diagnostics.AddError("read tags", err.Error())
		return
	default:
		tags := map[string]string{}
		if err := json.Unmarshal(tb, &tags); err != nil {
			resp.Diagnostics.AddError("read tags", fmt.Sprintf("%s: %v", sidecar(name), err))
			return
		}
		v, d := types.MapValueFrom(ctx, types.StringType, tags)
		if resp.Diagnostics.Append(d...); resp.Diagnostics.HasError() {
			return
		}
		m.Tags = v
	}
	m.ID = types.StringValue(idOf(name)) // an imported object has only its filename
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, &m)...)
}

func (fileRes) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if m.FailOnUpdate.ValueBool() {
		resp.Diagnostics.AddError("testkit: fail_on_update", "update failed on purpose for "+m.Filename.ValueString())
		return
	}
	if err := write(ctx, &m); err != nil {
		resp.Diagnostics.AddError("write", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	resp.Diagnostics.Append(setIdentity(ctx, resp.Identity, &m)...)
}

func (fileRes) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m fileModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &m)...); resp.Diagnostics.HasError() {
		return
	}
	if name := m.Filename.ValueString(); exists(failDeleteFile(name)) {
		resp.Diagnostics.AddError("testkit: fail-delete", "delete failed on purpose for "+name+" ("+failDeleteFile(name)+" exists)")
		return
	}
	for _, f := range []string{m.Filename.ValueString(), sidecar(m.Filename.ValueString())} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			resp.Diagnostics.AddError("remove", err.Error())
		}
	}
}

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return prov{} },
		providerserver.ServeOpts{Address: "registry.opentofu.org/example/testkit"})
	if err != nil {
		log.Fatal(err)
	}
}
