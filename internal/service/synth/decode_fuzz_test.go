package synth

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/lang/render"
	"github.com/lava-operator/lava/internal/platform/bus"
)

// FuzzObservedToSynthesized decodes arbitrary bytes as a ResourceObserved the way synth's
// consumer does (bus.DecodeBody) and runs what synth does with it before any write: the render
// input (Service.input, here without Kubernetes access, so bindingsFrom fails cleanly), the
// synthesis (render.Synthesize), the policy gate (checkPolicy), the gate verdict, the render
// record and the provider list of the Synthesized it would publish. A Flux source is dropped
// (fetching it is HTTP, not decoding). Nothing panics; a synthesis is valid JSON; a failed one
// has a message; the Synthesized built from it encodes.
func FuzzObservedToSynthesized(f *testing.F) {
	env := &lavav1.Envelope{EventId: "e", Source: "watcher", Generation: 1,
		Resource: &lavav1.ResourceRef{Namespace: "ns", Name: "n", Uid: "u"}}
	seeds := []*lavav1.ResourceObserved{
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: `(deflava-architecture kit
  :inputs ((:dir "/tmp") (:rev "0"))
  :resources ((terraform-data "marker" :input "{rev}")))`}}, Bindings: map[string]string{"dir": "/x", "rev": "1"}}},
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Name{Name: "aws-vpc-network"}},
			Bindings: map[string]string{"name": "prod", "cidr": "10.42.0.0/16"}, Gate: "aws-vpc-network"}},
		{Envelope: env, Spec: &lavav1.ArchitectureSpec{Source: &lavav1.Source{Kind: &lavav1.Source_Inline{Inline: "(deflava-architecture"}},
			BindingsFrom: []*lavav1.BindingsFromRef{{Ref: &lavav1.BindingsFromRef_ConfigMapRef{ConfigMapRef: &lavav1.ObjectKeyRef{Name: "cm"}}}}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	j, err := protojson.Marshal(seeds[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(j) // not binary protobuf: refused by the decoder
	s := &Service{}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := &bus.Message{Subject: bus.ResourceSubject("ns", "n", bus.EventObserved), Header: nats.Header{}, Data: data}
		msg.Header.Set(bus.HeaderSchema, "lava.v1.ResourceObserved")
		if bus.DecodeBody(nil, msg) != nil {
			return
		}
		obs, ok := msg.Event.(*lavav1.ResourceObserved)
		if !ok {
			t.Fatalf("decoded %T", msg.Event)
		}
		if obs.GetSpec().GetSource().GetFlux() != nil {
			obs.Spec.Source = nil
		}
		in, _, fail, err := s.renderer().input(t.Context(), obs.GetSpec(), obs.GetEnvelope().GetResource().GetNamespace())
		if err != nil || fail != nil {
			if fail != nil && (fail.Reason == "" || fail.Message == "") {
				t.Fatalf("a failure without reason or message: %+v", fail)
			}
			return
		}
		out, diags := render.Synthesize(in)
		if out == nil {
			if diagMessage(diags) == "" {
				t.Fatal("a failed synthesis without a message")
			}
			return
		}
		if !json.Valid(out.JSON) {
			t.Fatalf("synthesized JSON is not valid: %q", out.JSON)
		}
		_ = checkPolicy(nil, in, out, "ns")
		ev := &lavav1.Synthesized{Envelope: env, Render: RecordProto(out.Record), Gate: Verdict(in, diags), Providers: providers(out)}
		if _, err := proto.Marshal(ev); err != nil {
			t.Fatalf("the Synthesized does not encode: %v", err)
		}
	})
}

// FuzzFileInTarGz reads spec.path out of an arbitrary byte string taken as a Flux artifact
// (fileInTarGz, the reader of ArtifactCache.File; the archive's digest was checked, its content
// is still the tenant's): nothing panics, every error is an *ArtifactError (reported as
// SourceFetchFailed), a path that is absolute or leaves the archive is refused, and no file
// over maxSourceFileBytes is returned.
func FuzzFileInTarGz(f *testing.F) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range []struct{ name, body string }{{"./arch/main.lava", "(deflava-architecture x)"}, {"arch/link", ""}} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.name == "arch/link" {
			h.Typeflag, h.Linkname = tar.TypeSymlink, "../../etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			f.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			f.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes(), "arch/main.lava")
	f.Add(buf.Bytes(), "arch/link")
	f.Add(buf.Bytes(), "../arch/main.lava")
	f.Add(buf.Bytes(), "/arch/main.lava")
	f.Add([]byte("not gzip"), "x")
	f.Fuzz(func(t *testing.T, data []byte, p string) {
		b, err := fileInTarGz(bytes.NewReader(data), p)
		if err != nil {
			var ae *ArtifactError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T %v is not an *ArtifactError", err, err)
			}
			return
		}
		want := path.Clean(strings.TrimPrefix(p, "./"))
		if path.IsAbs(p) || want == ".." || strings.HasPrefix(want, "../") {
			t.Fatalf("path %q leaves the archive and was read", p)
		}
		if len(b) > maxSourceFileBytes {
			t.Fatalf("read %d bytes, more than %d", len(b), maxSourceFileBytes)
		}
	})
}
