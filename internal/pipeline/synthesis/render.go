package synthesis

import (
	"strings"

	"github.com/lava-operator/lava/api/v1alpha1"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/gate"
	"github.com/lava-operator/lava/internal/lang/policy"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/pipeline"
)

// minRedactBytes: secret values at least this long are also scrubbed from every Failed
// message and log line by plain replacement (shorter ones only where render.Synthesize finds
// them quoted, so a one-letter secret does not mangle the text).
const minRedactBytes = 4

// CheckPolicy applies namespace's effective tenant policy from pf (nil: the built-in policy) to
// a successful render: nil when it passes, else a PolicyRejected failure (retryable when the
// policy document could not be read, so an admin's fix takes effect; not retryable for a
// violation, which needs a new generation; diags holds the violations). The one policy gate
// of synth's pipeline renders and of RenderService previews.
func CheckPolicy(pf *policy.File, in render.Input, out *render.Output, namespace string) *pipeline.Failure {
	cfg, err := pf.Load()
	if err != nil {
		return &pipeline.Failure{Reason: v1alpha1.ReasonPolicyRejected, Message: "the tenant policy cannot be read, so nothing is rendered: " + err.Error(), Kind: pipeline.FailureRetryable}
	}
	if ds := render.CheckPolicy(in, out, cfg.For(namespace)); len(ds) > 0 {
		return &pipeline.Failure{Reason: v1alpha1.ReasonPolicyRejected, Message: DiagMessage(ds), Err: ds}
	}
	return nil
}

// KnownSource reports whether a bundled architecture exists.
func KnownSource(name string) bool {
	_, ok := catalog.Get(name)
	return ok
}

// GateRejected reports whether in's gate refuses it: the gate is unknown, or the bindings do
// not satisfy its interface.
func GateRejected(in render.Input) bool {
	if in.Gate == "" {
		return false
	}
	e, ok := catalog.Get(in.Gate)
	if !ok || e.Interface == nil {
		return true
	}
	return !gate.Validate(e.Interface, gate.Bag{Scalars: in.Bindings.Scalars, Lists: in.Bindings.Lists, Records: in.Bindings.Records}).OK()
}

// Providers lists the architecture's :providers as requirements, with their :version pins, in
// order, without repeating a local name (aliases share one requirement: the first form's
// :version is the pin).
func Providers(out *render.Output) []*lavav1.ProviderRequirement {
	var reqs []*lavav1.ProviderRequirement
	seen := map[string]bool{}
	for _, p := range out.Architecture.Providers {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		src := p.Source
		if src == "" {
			src = "hashicorp/" + p.Name
		}
		reqs = append(reqs, &lavav1.ProviderRequirement{Name: p.Name, Source: src, Version: p.Version})
	}
	return reqs
}

// DiagMessage joins the error diagnostics as "file:line:col: message" lines, whole: synth's Failed
// redacts, then bounds it.
func DiagMessage(diags tlisp.Diagnostics) string {
	return strings.TrimSpace(diags.Errors().String())
}

// BindingsOf converts the proto bindings maps into [tlisp.Bindings] (nil maps stay empty).
func BindingsOf(scalars map[string]string, lists map[string]*lavav1.StringList, records map[string]*lavav1.RecordList) tlisp.Bindings {
	b := tlisp.Bindings{Scalars: map[string]string{}, Lists: map[string][]string{}, Records: map[string][]map[string]string{}}
	for k, v := range scalars {
		b.Scalars[k] = v
	}
	for k, v := range lists {
		b.Lists[k] = append([]string{}, v.GetValues()...)
	}
	for k, v := range records {
		rows := make([]map[string]string, 0, len(v.GetRecords()))
		for _, r := range v.GetRecords() {
			row := map[string]string{}
			for f, x := range r.GetFields() {
				row[f] = x
			}
			rows = append(rows, row)
		}
		b.Records[k] = rows
	}
	return b
}

// Diagnostics converts tlisp diagnostics to their proto form, in order.
func Diagnostics(ds tlisp.Diagnostics) []*lavav1.Diagnostic {
	out := make([]*lavav1.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR
		if d.Severity == tlisp.SeverityWarning {
			sev = lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING
		}
		out = append(out, &lavav1.Diagnostic{File: d.Pos.File, Line: int32(d.Pos.Line), Column: int32(d.Pos.Col),
			Severity: sev, Message: d.Message})
	}
	return out
}
