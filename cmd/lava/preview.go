package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/lang/planpolicy"
	"github.com/lava-operator/lava/internal/lang/tlisp"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/pipeline/synthesis"
	"github.com/lava-operator/lava/internal/up"
)

const previewLong = `With --speculative, plan renders the LavaArchitecture of FILE (one document) and plans it
against the live object's state, through the applier's PlanService, without applying or
writing anything: no state, no record, no event, no state lock. It prints the plan as
` + "`lava plan show`" + ` does (actions and attribute changes, sensitive values and the values of
bound Secrets masked) with the verdict of the namespace's plan rules, and the plan id the
object gets when this spec is applied and nothing else changes (the state, the bindings, the
provider versions). Merge the manifest with spec.approvePlan set to that id: the applier then
applies exactly that plan and refuses any other (reason PlanSuperseded).

The object is the manifest's namespace/name, or --against's. A manifest that does not render
is answered with the diagnostics ` + "`lava validate`" + ` prints (file:line:col), on stderr, and
exit code 1. --source-file plans a .tlisp file in place of the manifest's source: for a
manifest with spec.sourceRef, the file of the branch its GitRepository will serve (the plan id
is the same: the rendering does not depend on where the text came from).

The applier serves PlanService on --server (lava up: the address in <state-dir>/plan.addr);
the caller authenticates with a bearer token (--token-file; lava up: <state-dir>/rpc.token;
on a cluster a Kubernetes token whose user may update lavaarchitectures in the namespace).
Exit codes: 0 a plan; 1 the manifest does not render, has no plan (the reason is printed) or
the plan rules deny its plan; 3 PlanService cannot be reached, refuses the token or is busy.`

type previewFlags struct {
	file, sourceFile, against, server, tokenFile, stateDir string
	asJSON                                                 bool
	timeout                                                time.Duration
}

func (f *previewFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "filename", "f", "", "the manifest `FILE` to plan (one LavaArchitecture document; - for standard input)")
	fs.StringVar(&f.sourceFile, "source-file", "", "plan the .tlisp `FILE` as the manifest's source, in place of spec.source or spec.sourceRef (the file of the branch a GitRepository will serve)")
	fs.StringVar(&f.against, "against", "", "plan as the object `NAMESPACE/NAME` instead of the manifest's own: rendered in that namespace (its policy, bindings and authorization) and planned against that object's state")
	fs.StringVar(&f.server, "server", "", "PlanService base `URL` (default: http:// and the address in <state-dir>/"+up.FilePlanAddr+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "bearer token `FILE` (default: <state-dir>/"+up.FileRPCToken+")")
	fs.StringVar(&f.stateDir, "state-dir", ".lava", "lava up's state `DIR`, for the default --server and --token-file")
	fs.BoolVar(&f.asJSON, "json", false, "print {planId, verdict, plan, review} as JSON instead (the plan record and the tofu show -json body)")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long")
}

// run is `lava plan --speculative`.
func (f *previewFlags) run(cmd *cobra.Command) error {
	if f.file == "" {
		return invalidInput(errors.New("--speculative needs -f FILE"))
	}
	data, err := readInput(cmd.InOrStdin(), f.file)
	if err != nil {
		return err
	}
	name := displayName(f.file)
	ms, err := manifest.Parse(name, data)
	if pe := (*manifest.PosError)(nil); errors.As(err, &pe) {
		// As lava validate prints it: position, severity, the source line and a caret.
		writeDiag(cmd.ErrOrStderr(), tlisp.Diagnostic{Pos: arch.Pos{File: name, Line: pe.Line, Col: pe.Col}, Message: pe.Msg}, name, sources{name: data}, true)
		return invalidInputPrinted(err)
	}
	if err != nil {
		return invalidInput(fmt.Errorf("%s: %w", name, err))
	}
	if len(ms) != 1 {
		return invalidInput(fmt.Errorf("%s: %d LavaArchitecture documents; --speculative plans exactly one", name, len(ms)))
	}
	m := ms[0]
	srcs := sources{m.File: data}
	// The server renders without the manifest's YAML positions: what it reports without one
	// (the gate's findings) is placed at spec.gate, else at spec, as lava validate places it.
	at := arch.Pos{File: name, Line: m.Line, Col: m.Col}
	if units, _ := loadUnits(name, data); len(units) == 1 && units[0].GatePos.IsValid() {
		at = units[0].GatePos
	}
	if f.sourceFile != "" {
		text, err := readInput(cmd.InOrStdin(), f.sourceFile)
		if err != nil {
			return err
		}
		file := displayName(f.sourceFile)
		m.Object.Spec.SourceRef, m.Object.Spec.Source = nil, v1alpha1.Source{Inline: string(text)}
		m.MapInline = func(p arch.Pos) arch.Pos { p.File = file; return p }
		srcs[file] = text
	}
	if m.Object.Spec.SourceRef != nil {
		return invalidInput(fmt.Errorf("%s: spec.sourceRef cannot be previewed: give the file of the revision to plan with --source-file", name))
	}
	key := state.Key{Namespace: m.Object.Namespace, Name: m.Object.Name}
	if f.against != "" {
		if key, err = state.ParseKey(f.against); err != nil {
			return invalidInput(err)
		}
	}
	client, token, err := f.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	req := connect.NewRequest(&lavav1.PreviewRequest{Namespace: key.Namespace, Name: key.Name, Spec: pipeline.SpecMirror(m.Object.Spec)})
	req.Header().Set("Authorization", "Bearer "+token)
	resp, err := client.Preview(ctx, req)
	switch code := connect.CodeOf(err); {
	case err == nil:
	case code == connect.CodeUnavailable || code == connect.CodeResourceExhausted || code == connect.CodeDeadlineExceeded || code == connect.CodeUnauthenticated:
		// Unreachable, busy, or not ours to call: the server, not the manifest (exit code 3).
		return unavailable(fmt.Errorf("PlanService at %s: %w", f.server, err))
	default:
		return fmt.Errorf("PlanService at %s: %w", f.server, err)
	}
	return f.print(cmd, key, m, srcs, at, resp.Msg)
}

// client returns the PlanService client of --server and the token of --token-file, each
// defaulting to lava up's files under --state-dir.
func (f *previewFlags) client() (lavav1connect.PlanServiceClient, string, error) {
	if f.server == "" {
		addr, err := os.ReadFile(filepath.Join(f.stateDir, up.FilePlanAddr))
		if err != nil {
			return nil, "", fmt.Errorf("no --server, and lava up's %s cannot be read (is lava up running with --state-dir %s?): %w", up.FilePlanAddr, f.stateDir, err)
		}
		f.server = "http://" + strings.TrimSpace(string(addr))
	}
	if f.tokenFile == "" {
		f.tokenFile = filepath.Join(f.stateDir, up.FileRPCToken)
	}
	tok, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return nil, "", fmt.Errorf("--token-file: %w", err)
	}
	return lavav1connect.NewPlanServiceClient(http.DefaultClient, f.server), strings.TrimSpace(string(tok)), nil
}

// print writes the preview of m (the files it came from in srcs) for key: the diagnostics on
// stderr (one without a position at at), then the plan, or the reason there is none (an
// error; its message only when it is not the diagnostics' errors printed above).
func (f *previewFlags) print(cmd *cobra.Command, key state.Key, m manifest.Manifest, srcs sources, at arch.Pos, r *lavav1.PreviewResponse) error {
	stderr, out := cmd.ErrOrStderr(), cmd.OutOrStdout()
	var sent tlisp.Diagnostics
	for _, pd := range r.GetDiagnostics() {
		d := tlisp.Diagnostic{Pos: arch.Pos{File: pd.GetFile(), Line: int(pd.GetLine()), Col: int(pd.GetColumn())}, Message: pd.GetMessage()}
		if pd.GetSeverity() == lavav1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING {
			d.Severity = tlisp.SeverityWarning
		}
		sent = append(sent, d)
		switch {
		case d.Pos.File == "inline" && d.Pos.Line > 0 && m.MapInline != nil:
			d.Pos = m.MapInline(d.Pos)
		case !d.Pos.IsValid():
			d.Pos = at
		}
		writeDiag(stderr, d, m.File, srcs, true)
	}
	if r.GetReason() != "" {
		msg := r.GetReason()
		if r.GetMessage() != "" && r.GetMessage() != synthesis.DiagMessage(sent) {
			msg += ": " + manifest.MapInlineText(r.GetMessage(), m.MapInline)
		}
		fmt.Fprintf(stderr, "%s: error: no plan of %s: %s\n", m.File, key, msg)
		return invalidInputPrinted(fmt.Errorf("no plan of %s: %s", key, r.GetReason()))
	}
	if f.asJSON {
		b, err := json.MarshalIndent(map[string]any{"planId": r.GetPlanId(), "verdict": r.GetVerdict(),
			"plan": json.RawMessage(r.GetPlanRecord()), "review": json.RawMessage(r.GetReviewBody())}, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, string(b)); err != nil {
			return err
		}
		return denied(stderr, m.File, key, r)
	}
	var rec engine.PlanRecord
	if err := json.Unmarshal(r.GetPlanRecord(), &rec); err != nil {
		return fmt.Errorf("PlanService answered a plan record that does not decode: %w", err)
	}
	fmt.Fprintf(out, "Speculative plan %s of %s (nothing was applied or written)\n", rec.PlanID, key)
	fmt.Fprintf(out, "Engine %s %s; planned %s against state serial %d, lineage %q, body %s\n\n",
		rec.Engine, rec.EngineVersion, rec.CreatedAt.UTC().Format(time.RFC3339), rec.StateSerial, rec.StateLineage, orNone(rec.StateDigest))
	if err := printPlan(out, rec.Policy, r.GetReviewBody()); err != nil {
		return err
	}
	if r.GetVerdict() == string(planpolicy.Deny) {
		return denied(stderr, m.File, key, r)
	}
	_, err := fmt.Fprintf(out, "\nTo apply exactly this plan, and refuse any other: set spec.approvePlan: %s in the manifest and apply it\n", rec.PlanID)
	return err
}

// denied reports a plan the namespace's plan rules deny on stderr and returns its error (exit
// code 1: it will never be applied); nil for any other verdict.
func denied(stderr io.Writer, file string, key state.Key, r *lavav1.PreviewResponse) error {
	if r.GetVerdict() != string(planpolicy.Deny) {
		return nil
	}
	fmt.Fprintf(stderr, "%s: error: the plan rules of namespace %s deny plan %s: it will not be applied, approved or not\n", file, key.Namespace, r.GetPlanId())
	return invalidInputPrinted(fmt.Errorf("plan %s of %s is denied by the plan rules", r.GetPlanId(), key))
}
