//go:build integration && providers

package embedded

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/keystonetest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// OpenStackVersion is the version of terraform-provider-openstack/openstack that
// hack/tools/build-openstack-provider.sh builds (`make tools-openstack`).
const OpenStackVersion = "3.4.0"

// EnvOpenStackMirror names the filesystem mirror holding the OpenStack provider.
const EnvOpenStackMirror = "LAVA_OPENSTACK_MIRROR"

// osConfig is the Terraform JSON of one step: a project, a user whose default project it is,
// and a role assignment of the user on the project, the role looked up by name. The provider
// block is empty: the credentials come from the environment, as a tenant's
// spec.providerEnvFrom gives them.
type osConfig struct {
	prefix          string
	description     string
	role            string
	imported        string // the id of a project created outside Lava to import, "" for none
	importedDescrip string
}

func (c osConfig) doc() map[string]any {
	res := map[string]any{
		"openstack_identity_project_v3": map[string]any{
			"p": map[string]any{"name": c.prefix + "-p", "description": "project " + c.description},
		},
		"openstack_identity_user_v3": map[string]any{
			"u": map[string]any{"name": c.prefix + "-u", "description": "user " + c.description,
				"default_project_id": "${openstack_identity_project_v3.p.id}"},
		},
		"openstack_identity_role_assignment_v3": map[string]any{
			"a": map[string]any{"project_id": "${openstack_identity_project_v3.p.id}",
				"user_id": "${openstack_identity_user_v3.u.id}",
				"role_id": "${data.openstack_identity_role_v3." + c.role + ".id}"},
		},
	}
	doc := map[string]any{
		"terraform": map[string]any{"required_providers": map[string]any{"openstack": map[string]any{
			"source": "terraform-provider-openstack/openstack", "version": OpenStackVersion}}},
		"provider": map[string]any{"openstack": map[string]any{}},
		"data": map[string]any{"openstack_identity_role_v3": map[string]any{
			"member": map[string]any{"name": "member"},
			"reader": map[string]any{"name": "reader"},
		}},
		"resource": res,
	}
	if c.imported != "" {
		res["openstack_identity_project_v3"].(map[string]any)["outside"] = map[string]any{
			"name": c.prefix + "-outside", "description": c.importedDescrip}
		doc["import"] = []any{map[string]any{"to": "openstack_identity_project_v3.outside", "id": c.imported}}
	}
	return doc
}

// osAPI calls Keystone's identity API and fails t unless it answers want.
func osAPI(t *testing.T, k *keystonetest.Keystone, method, path string, body any, want int) []byte {
	t.Helper()
	code, out := k.Do(t, method, path, body)
	if code != want {
		t.Fatalf("keystone %s %s: %d (want %d): %s", method, path, code, want, out)
	}
	return out
}

func osSteps(k *keystonetest.Keystone) []realStep {
	base := func(desc, role string) func(c *realChain) map[string]any {
		return func(c *realChain) map[string]any {
			return osConfig{prefix: c.prefix, description: desc, role: role}.doc()
		}
	}
	all := func(act string) func(*realChain) map[string]string {
		return func(*realChain) map[string]string {
			return map[string]string{"openstack_identity_project_v3.p": act, "openstack_identity_user_v3.u": act,
				"openstack_identity_role_assignment_v3.a": act}
		}
	}
	return []realStep{
		{about: "create", config: base("one", "member"), want: all("create")},
		{about: "no change", config: base("one", "member"), want: all("no-op")},
		{about: "in-place update of both descriptions", config: base("two", "member"),
			want: func(*realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "update", "openstack_identity_user_v3.u": "update",
					"openstack_identity_role_assignment_v3.a": "no-op"}
			}},
		{about: "another role replaces the assignment", config: base("two", "reader"),
			want: func(*realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "delete,create"}
			}},
		{about: "the project's description changed behind Lava's back", drift: true, severity: engine.SeverityFunctional, config: base("two", "reader"),
			behind: func(t *testing.T, c *realChain) {
				osAPI(t, k, http.MethodPatch, "/projects/"+c.id("openstack_identity_project_v3.p"),
					map[string]any{"project": map[string]any{"description": "changed behind Lava's back", "enabled": false}}, http.StatusOK)
			},
			want: func(*realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "update", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "no-op"}
			}},
		{about: "the user deleted behind Lava's back", drift: true, severity: engine.SeverityCritical, config: base("two", "reader"),
			behind: func(t *testing.T, c *realChain) {
				osAPI(t, k, http.MethodDelete, "/users/"+c.id("openstack_identity_user_v3.u"), nil, http.StatusNoContent)
			},
			want: func(*realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "create",
					"openstack_identity_role_assignment_v3.a": "create"}
			}},
		{about: "import of a project created outside Lava",
			behind: func(t *testing.T, c *realChain) {
				out := osAPI(t, k, http.MethodPost, "/projects", map[string]any{"project": map[string]any{
					"name": c.prefix + "-outside", "description": "made outside", "domain_id": "default"}}, http.StatusCreated)
				var p struct {
					Project struct {
						ID string `json:"id"`
					} `json:"project"`
				}
				if err := json.Unmarshal(out, &p); err != nil || p.Project.ID == "" {
					t.Fatalf("create project: %v %s", err, out)
				}
				c.outside = p.Project.ID
			},
			config: func(c *realChain) map[string]any {
				return osConfig{prefix: c.prefix, description: "two", role: "reader", imported: c.outside, importedDescrip: "made outside"}.doc()
			},
			want: func(c *realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "no-op", "openstack_identity_user_v3.u": "no-op",
					"openstack_identity_role_assignment_v3.a": "no-op", "openstack_identity_project_v3.outside": "no-op import=" + c.outside}
			}},
		{about: "destroy", destroy: true,
			config: func(c *realChain) map[string]any {
				return osConfig{prefix: c.prefix, description: "two", role: "reader", imported: c.outside, importedDescrip: "made outside"}.doc()
			},
			want: func(c *realChain) map[string]string {
				return map[string]string{"openstack_identity_project_v3.p": "delete", "openstack_identity_user_v3.u": "delete",
					"openstack_identity_role_assignment_v3.a": "delete", "openstack_identity_project_v3.outside": "delete"}
			}},
	}
}

// TestOpenStack_tofuOracle runs the OpenStack provider (terraform-provider-openstack/openstack
// 3.4.0, SDKv2, protocol 5) against a real Keystone on PostgreSQL on both engines, OpenTofu
// being the oracle, with a project, a user and a role assignment: create, no change, an
// in-place update, a replacement, a change made behind Lava's back through the identity API,
// a deletion behind its back, the import of a project created outside, destroy; each step
// both ways, as [realRun.run] checks them.
//
// The admin's credentials reach the provider only through its environment (the OS_*
// variables of the embedded engine's provider credentials, tofu's environment), as a
// tenant's spec.providerEnvFrom gives them; the password shows in no state, drift finding or
// error.
func TestOpenStack_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	bin := "terraform-provider-openstack/openstack/" + OpenStackVersion + "/linux_amd64/terraform-provider-openstack_v" + OpenStackVersion
	mirror := realMirror(t, tools, EnvOpenStackMirror, "tools-openstack", bin)
	k := keystonetest.Start(t)
	realRun{
		tools: tools, mirror: mirror,
		required: map[string]any{"openstack": map[string]any{
			"source": "terraform-provider-openstack/openstack", "version": OpenStackVersion}},
		creds:   &credentials.Provider{Identity: "test", Env: k.Env()},
		secrets: []string{k.Password},
		steps:   osSteps(k),
		afterEmbedded: func(t *testing.T, c *realChain) {
			// The destroy removed every object from Keystone.
			if code, _ := k.Do(t, http.MethodGet, "/projects/"+c.outside, nil); code != http.StatusNotFound {
				t.Errorf("the imported project is still there after the destroy: GET %d", code)
			}
		},
	}.run(t)
}
