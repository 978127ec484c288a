package synth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
)

// RenderServer implements lavav1connect.RenderServiceHandler with [render.Synthesize]: a preview
// render that stores nothing and publishes nothing, refused by the same tenant policy gate as
// synth's pipeline renders ([synthesis.CheckPolicy]). Its zero value uses the built-in policy.
type RenderServer struct {
	// Policy is the admin's tenant policy document (synth's --policy-file); nil: the built-in
	// policy ([policy.Default]).
	Policy *policy.File
}

var _ lavav1connect.RenderServiceHandler = RenderServer{}

// NewRenderHandler returns the connect path and handler of RenderService
// ("/lava.v1.RenderService/") checking renders against pol (nil: the built-in policy), to mount
// on the service's connect listener (:8080).
func NewRenderHandler(pol *policy.File, opts ...connect.HandlerOption) (string, http.Handler) {
	return lavav1connect.NewRenderServiceHandler(RenderServer{Policy: pol}, opts...)
}

// Render resolves the source, gates, renders and applies the tenant policy of the request's
// namespace. Invalid source or bindings come back as diagnostics with an empty terraform_json;
// a render the policy refuses comes back with reason "PolicyRejected", its violations as
// diagnostics (file:line:col) and no terraform_json. The RPC fails only with InvalidArgument
// when no source is set, NotFound when the bundled name or gate is unknown, and Unavailable
// when the policy document cannot be read (fail closed).
func (rs RenderServer) Render(_ context.Context, req *connect.Request[lavav1.RenderRequest]) (*connect.Response[lavav1.RenderResponse], error) {
	r := req.Msg
	in := render.Input{Bindings: synthesis.BindingsOf(r.GetBindings(), r.GetListBindings(), r.GetRecordBindings()), Gate: r.GetGate()}
	switch src := r.GetSource().(type) {
	case *lavav1.RenderRequest_Inline:
		in.SourceKind, in.SourceText = render.SourceInline, []byte(src.Inline)
		in.File = r.GetFileName()
		if in.File == "" {
			in.File = "inline"
		}
	case *lavav1.RenderRequest_Name:
		if _, ok := catalog.Get(src.Name); !ok {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown bundled architecture %q", src.Name))
		}
		in.SourceKind, in.SourceName = render.SourceName, src.Name
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no source: set inline or name"))
	}
	if in.Gate != "" {
		if e, ok := catalog.Get(in.Gate); !ok || e.Interface == nil {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown bundled interface %q", in.Gate))
		}
	}
	out, diags := render.Synthesize(in)
	if f := synthesis.CheckPolicy(rs.Policy, in, out, r.GetNamespace()); f != nil {
		if f.Retryable() {
			return nil, connect.NewError(connect.CodeUnavailable, errors.New(f.Message))
		}
		var violations tlisp.Diagnostics // a PolicyRejected failure's Err
		errors.As(f, &violations)
		diags = append(diags, violations...)
		out = nil
		resp := &lavav1.RenderResponse{Diagnostics: synthesis.Diagnostics(diags), Reason: f.Reason}
		if in.Gate != "" {
			resp.Gate = Verdict(in, diags)
		}
		return connect.NewResponse(resp), nil
	}
	resp := &lavav1.RenderResponse{Diagnostics: synthesis.Diagnostics(diags)}
	if in.Gate != "" {
		resp.Gate = Verdict(in, diags)
	}
	if out != nil {
		resp.TerraformJson = string(out.JSON)
		resp.Render = RecordProto(out.Record)
	}
	return connect.NewResponse(resp), nil
}

// SourceKindProto maps a [render.Input] source kind to its proto enum.
func SourceKindProto(kind string) lavav1.SourceKind {
	switch kind {
	case render.SourceInline:
		return lavav1.SourceKind_SOURCE_KIND_INLINE
	case render.SourceName:
		return lavav1.SourceKind_SOURCE_KIND_NAME
	}
	return lavav1.SourceKind_SOURCE_KIND_UNSPECIFIED
}

// RecordProto converts a [render.RenderRecord] (rendered_at and observed_generation unset).
func RecordProto(r render.RenderRecord) *lavav1.RenderRecord {
	return &lavav1.RenderRecord{
		SourceKind:          SourceKindProto(r.SourceKind),
		SourceDigest:        r.SourceDigest,
		BindingsDigest:      r.BindingsDigest,
		Gate:                r.Gate,
		ArchitectureName:    r.ArchitectureName,
		ResourceCount:       int32(r.ResourceCount),
		TerraformJsonDigest: r.TerraformJSONDigest,
		EvaluatorVersion:    r.EvaluatorVersion,
	}
}

// Verdict is the gate verdict of a synthesis of in with diagnostics diags (already redacted):
// passed when no diagnostic is a gate error ([GateRejected] says which are), errors and warnings
// as "file:line:col: message" text.
func Verdict(in render.Input, diags tlisp.Diagnostics) *lavav1.GateVerdict {
	v := &lavav1.GateVerdict{Gate: in.Gate, Passed: true}
	if in.Gate == "" {
		return v
	}
	if synthesis.GateRejected(in) {
		v.Passed = false
		for _, d := range diags.Errors() {
			v.Errors = append(v.Errors, d.String())
		}
	}
	for _, d := range diags.Warnings() {
		v.Warnings = append(v.Warnings, d.String())
	}
	return v
}
