package synth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/lang/bundle"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/service/synth"
)

func TestRenderService(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(synth.NewRenderHandler(nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := lavav1connect.NewRenderServiceClient(srv.Client(), srv.URL)
	seed := `(deflava-architecture demo-vpc
  :inputs ((:cidr "10.42.0.0/16"))
  :resources ((aws-vpc "main" :cidr-block "{cidr}")))`
	tests := []struct {
		name     string
		req      *lavav1.RenderRequest
		wantCode connect.Code // 0: success
		check    func(t *testing.T, r *lavav1.RenderResponse)
	}{
		{"inline with gate", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{Inline: seed},
			Bindings: map[string]string{"cidr": "10.9.0.0/16"}, Gate: "aws-vpc-network"}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				if !strings.Contains(r.GetTerraformJson(), `"cidr_block": "10.9.0.0/16"`) || !r.GetGate().GetPassed() ||
					r.GetRender().GetArchitectureName() != "demo-vpc" || r.GetRender().GetSourceKind() != lavav1.SourceKind_SOURCE_KIND_INLINE {
					t.Errorf("response = %v", r)
				}
			}},
		{"invalid source is diagnostics", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{Inline: "(deflava-architecture x\n  :resources ((aws-vpc \"m\" :cidr-block ))"},
			FileName: "x.tlisp"}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				if r.GetTerraformJson() != "" || r.GetRender() != nil || len(r.GetDiagnostics()) == 0 {
					t.Fatalf("response = %v", r)
				}
				d := r.GetDiagnostics()[0]
				if d.GetFile() != "x.tlisp" || d.GetLine() < 1 || d.GetColumn() < 1 || d.GetSeverity() != lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR {
					t.Errorf("diagnostic = %v", d)
				}
			}},
		{"gate rejection is a verdict", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{Inline: seed},
			Bindings: map[string]string{"cidr": "banana"}, Gate: "aws-vpc-network"}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				if r.GetGate().GetPassed() || len(r.GetGate().GetErrors()) == 0 || r.GetTerraformJson() != "" {
					t.Errorf("response = %v", r)
				}
			}},
		{"bundled", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "aws-vpc-network"}}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				if r.GetRender().GetResourceCount() != 11 || r.GetGate() != nil {
					t.Errorf("response = %v", r)
				}
			}},
		{"bundled with module directories", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "modules-demo"}}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				mods, err := bundle.Read([]byte(r.GetTerraformJson()))
				if err != nil || len(mods) != 2 || mods["modules/stamp"] == nil || mods["modules/stamp/tag"] == nil || r.GetReason() != "" {
					t.Errorf("bundle %v (%v), response = %v", mods, err, r)
				}
			}},
		{"inline local module is refused", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{
			Inline: "(deflava-architecture x\n  :modules ((net :source \"./modules/net\"))\n  :resources ())"}, FileName: "x.tlisp"}, 0,
			func(t *testing.T, r *lavav1.RenderResponse) {
				if r.GetTerraformJson() != "" || len(r.GetDiagnostics()) != 1 {
					t.Fatalf("response = %v", r)
				}
				d := r.GetDiagnostics()[0]
				if d.GetFile() != "x.tlisp" || d.GetLine() != 2 || d.GetColumn() != 13 ||
					!strings.Contains(d.GetMessage(), `module net: the local source "./modules/net" names a module directory, but an inline source has no bundle`) {
					t.Errorf("diagnostic = %v", d)
				}
			}},
		{"no source", &lavav1.RenderRequest{}, connect.CodeInvalidArgument, nil},
		{"unknown name", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Name{Name: "nope"}}, connect.CodeNotFound, nil},
		{"unknown gate", &lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{Inline: seed}, Gate: "nope"}, connect.CodeNotFound, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := c.Render(t.Context(), connect.NewRequest(tt.req))
			if tt.wantCode != 0 {
				if connect.CodeOf(err) != tt.wantCode {
					t.Fatalf("error %v, want code %v", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, resp.Msg)
		})
	}
}

// TestRenderService_policyGate: RenderService previews run synth's tenant policy gate for the
// request's namespace: a local-exec provisioner is refused with reason PolicyRejected, the
// violation as a file:line:col diagnostic and no Terraform JSON; a namespace the admin's policy
// document relaxes renders it; an unreadable policy document fails closed (Unavailable).
func TestRenderService_policyGate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	polPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polPath, []byte("namespaces:\n  relaxed: {allowProvisioners: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := func(pol *policy.File) lavav1connect.RenderServiceClient {
		mux := http.NewServeMux()
		mux.Handle(synth.NewRenderHandler(pol))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return lavav1connect.NewRenderServiceClient(srv.Client(), srv.URL)
	}
	src := "(deflava-architecture x\n  :resources ((terraform-data \"run\" :input \"a\"\n                :provisioner (:local-exec (:command \"touch /tmp/pwned\")))))"
	req := func(ns string) *connect.Request[lavav1.RenderRequest] {
		return connect.NewRequest(&lavav1.RenderRequest{Source: &lavav1.RenderRequest_Inline{Inline: src}, FileName: "x.tlisp", Namespace: ns})
	}
	for _, pol := range []*policy.File{nil, {Path: polPath}} {
		resp, err := client(pol).Render(t.Context(), req("team-a"))
		if err != nil {
			t.Fatal(err)
		}
		r := resp.Msg
		if r.GetReason() != v1alpha1.ReasonPolicyRejected || r.GetTerraformJson() != "" || r.GetRender() != nil {
			t.Fatalf("policy %v: reason %q, json %d bytes, render %v; want PolicyRejected and nothing rendered", pol, r.GetReason(), len(r.GetTerraformJson()), r.GetRender())
		}
		var found bool
		for _, d := range r.GetDiagnostics() {
			if d.GetFile() == "x.tlisp" && d.GetLine() == 2 && d.GetColumn() == 15 && d.GetSeverity() == lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR &&
				strings.Contains(d.GetMessage(), "a provisioner block is not allowed") {
				found = true
			}
		}
		if !found {
			t.Errorf("policy %v: diagnostics %v, want x.tlisp:2:15 naming the provisioner", pol, r.GetDiagnostics())
		}
	}
	resp, err := client(&policy.File{Path: polPath}).Render(t.Context(), req("relaxed"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetReason() != "" || !strings.Contains(resp.Msg.GetTerraformJson(), "local-exec") {
		t.Errorf("relaxed namespace: reason %q, json %q; want it rendered", resp.Msg.GetReason(), resp.Msg.GetTerraformJson())
	}
	_, err = client(&policy.File{Path: filepath.Join(dir, "missing.yaml")}).Render(t.Context(), req("relaxed"))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "tenant policy cannot be read") {
		t.Errorf("unreadable policy: %v, want Unavailable", err)
	}
}
