package protocheck_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
)

// echoRender answers Render with the inline source as the Terraform JSON and one diagnostic per
// binding, so the test sees request fields arrive.
type echoRender struct{}

func (echoRender) Render(_ context.Context, req *connect.Request[lavav1.RenderRequest]) (*connect.Response[lavav1.RenderResponse], error) {
	if req.Msg.GetInline() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no source"))
	}
	resp := &lavav1.RenderResponse{
		TerraformJson: req.Msg.GetInline(),
		Gate:          &lavav1.GateVerdict{Gate: req.Msg.GetGate(), Passed: true},
	}
	for k, v := range req.Msg.GetBindings() {
		resp.Diagnostics = append(resp.Diagnostics, &lavav1.Diagnostic{
			File: req.Msg.GetFileName(), Line: 1, Column: 2,
			Severity: lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING, Message: k + "=" + v,
		})
	}
	return connect.NewResponse(resp), nil
}

// TestConnectServices: the generated handlers and clients talk over a real HTTP server with the
// connect protocol (binary and JSON codecs, and GET for the side-effect-free methods).
func TestConnectServices(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(lavav1connect.NewRenderServiceHandler(echoRender{}))
	mux.Handle(lavav1connect.NewReceiptServiceHandler(lavav1connect.UnimplementedReceiptServiceHandler{}))
	var methods sync.Map // HTTP method -> true, to see GET used
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods.Store(r.Method, true)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	req := &lavav1.RenderRequest{
		Source:   &lavav1.RenderRequest_Inline{Inline: `{"resource":{}}`},
		Bindings: map[string]string{"cidr": "10.0.0.0/16"},
		Gate:     "aws-vpc-network",
		FileName: "prod.tlisp",
	}
	want := &lavav1.RenderResponse{
		TerraformJson: `{"resource":{}}`,
		Gate:          &lavav1.GateVerdict{Gate: "aws-vpc-network", Passed: true},
		Diagnostics: []*lavav1.Diagnostic{{
			File: "prod.tlisp", Line: 1, Column: 2,
			Severity: lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING, Message: "cidr=10.0.0.0/16",
		}},
	}
	clients := map[string][]connect.ClientOption{
		"proto":    nil,
		"json":     {connect.WithProtoJSON()},
		"http-get": {connect.WithHTTPGet()},
	}
	for name, opts := range clients {
		t.Run(name, func(t *testing.T) {
			c := lavav1connect.NewRenderServiceClient(srv.Client(), srv.URL, opts...)
			resp, err := c.Render(t.Context(), connect.NewRequest(req))
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if !proto.Equal(resp.Msg, want) {
				t.Errorf("Render = %v, want %v", resp.Msg, want)
			}
			_, err = c.Render(t.Context(), connect.NewRequest(&lavav1.RenderRequest{}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("Render without source: code %v (%v), want invalid_argument", connect.CodeOf(err), err)
			}
		})
	}

	if _, ok := methods.Load(http.MethodGet); !ok {
		t.Errorf("no request used GET, though Render has no side effects and WithHTTPGet was set")
	}

	rc := lavav1connect.NewReceiptServiceClient(srv.Client(), srv.URL)
	_, err := rc.VerifyChain(t.Context(), connect.NewRequest(&lavav1.VerifyChainRequest{Namespace: "infra", Name: "prod-vpc"}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Errorf("VerifyChain on the unimplemented handler: code %v, want unimplemented", connect.CodeOf(err))
	}
}
