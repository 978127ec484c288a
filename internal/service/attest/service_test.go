package attest_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/gen/lava/v1/lavav1connect"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// TestService_lifecycle runs the attest service on its durable consumers: a full lifecycle of
// PhaseChanged events (a failure included), each published twice, a viggy tick and an anomaly
// give one receipt each in the resource's chain, which verifies; each receipt is announced by a
// ReceiptAppended on the resource's phase subject.
func TestService_lifecycle(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	s := receipttest.Signer(t)
	svc := attest.NewService(js, attest.NewStore(js, attest.StoreOptions{Signer: s}), attest.ServiceOptions{})
	run(t, svc.Run)

	pub := bus.NewPublisher(js)
	phases := append([]lavav1.Phase{lavav1.Phase_PHASE_FAILED}, receipttest.Lifecycle...)
	prev := lavav1.Phase_PHASE_UNSPECIFIED
	for i, phase := range phases {
		pc := receipttest.PhaseChanged("infra", "web.prod", prev, phase, i)
		prev = phase
		for range 2 { // the second publish is a retried publish (Nats-Msg-Id de-duplicates it)
			if _, err := pub.PublishEvent(t.Context(), pc); err != nil {
				t.Fatal(err)
			}
		}
	}
	an := receipttest.Anomaly("infra", "web.prod", 1)
	if _, err := pub.PublishEvent(t.Context(), an); err != nil {
		t.Fatal(err)
	}
	tr := receipttest.Tick("infra", "web.prod", 1, lavav1.Phase_PHASE_RECONVERGING, lavav1.RemediationAction_REMEDIATION_ACTION_AUTO_CORRECT, "1 drifted field(s)")
	if _, err := pub.PublishEvent(t.Context(), tr); err != nil {
		t.Fatal(err)
	}
	want := len(phases) + 2
	var chain []*lavav1.Receipt
	eventually(t, 10*time.Second, "every event attested", func() bool {
		chain = readChain(t, js, "infra", "web.prod")
		return len(chain) >= want
	})
	if len(chain) != want {
		t.Fatalf("chain has %d receipts, want %d", len(chain), want)
	}
	kinds := map[string]int{}
	for _, r := range chain {
		kinds[r.GetKind()]++
	}
	if kinds[readmodel.KindOutcome] != len(phases)+1 || kinds[readmodel.KindAnomaly] != 1 {
		t.Fatalf("kinds %v", kinds)
	}
	if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}); !res.OK() {
		t.Fatal(receipttest.Messages(res))
	}

	// The head is announced on lava.v1.phase.infra.web_prod.receipt_appended.
	stream, err := js.Stream(t.Context(), bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	subject := bus.PhaseSubject("infra", "web.prod", attest.EventReceiptAppended)
	var ra lavav1.ReceiptAppended
	eventually(t, 5*time.Second, "ReceiptAppended of the head", func() bool {
		m, err := stream.GetLastMsgForSubject(t.Context(), subject)
		if err != nil {
			return false
		}
		if err := proto.Unmarshal(m.Data, &ra); err != nil {
			t.Fatal(err)
		}
		return ra.GetSequence() == uint64(want-1)
	})
	head := chain[len(chain)-1]
	if !bytes.Equal(ra.GetContentHash(), head.GetContentHash()) || ra.GetKind() != head.GetKind() || ra.GetKeyId() != s.KeyID() {
		t.Fatalf("ReceiptAppended %v does not describe the head", &ra)
	}
	cause := receipttest.PayloadEventID(head.GetPayload())
	wantID := eventid.ID("uid-web.prod", 1, "lava.v1.ReceiptAppended", eventid.CauseTrigger(cause))
	if env := ra.GetEnvelope(); env.GetEventId() != wantID || env.GetSource() != "attest" || env.GetTrigger() != "cause:"+cause {
		t.Fatalf("ReceiptAppended envelope %v", env)
	}
	info, err := stream.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subject]; n != uint64(want) {
		t.Fatalf("%d ReceiptAppended stored, want %d", n, want)
	}
}

// TestService_Record: recording the same event twice appends once; an event of another type is
// rejected.
func TestService_Record(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	svc := attest.NewService(js, attest.NewStore(js, attest.StoreOptions{}), attest.ServiceOptions{})
	pc := receipttest.PhaseChanged("a", "b", lavav1.Phase_PHASE_PENDING, lavav1.Phase_PHASE_SYNTHESIZED, 1)
	first, err := svc.Record(t.Context(), pc, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Record(t.Context(), pc, time.Time{})
	if err != nil || !again.Duplicate || again.StreamSeq != first.StreamSeq {
		t.Fatalf("second record: %+v %v", again, err)
	}
	if _, err := svc.Record(t.Context(), &lavav1.Applied{Envelope: pc.GetEnvelope()}, time.Time{}); !errors.Is(err, attest.ErrInvalidRequest) {
		t.Fatalf("Applied: %v, want ErrInvalidRequest", err)
	}
}

// TestHandler: ReceiptService over a real HTTP server returns the chain (from a sequence) and
// verifies it, reporting failures in the response; bad requests are InvalidArgument.
func TestHandler(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	s := receipttest.Signer(t)
	store := attest.NewStore(js, attest.StoreOptions{Signer: s})
	for i, phase := range receipttest.Lifecycle {
		if _, err := store.Append(t.Context(), request("infra", "vpc", phase, i)); err != nil {
			t.Fatal(err)
		}
	}
	client := startHandler(t, js)

	got, err := client.GetChain(t.Context(), connect.NewRequest(&lavav1.GetChainRequest{Namespace: "infra", Name: "vpc", FromSequence: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Msg.GetReceipts()); n != 3 || got.Msg.GetReceipts()[0].GetSequence() != 2 {
		t.Fatalf("GetChain from 2: %d receipts", n)
	}
	empty, err := client.GetChain(t.Context(), connect.NewRequest(&lavav1.GetChainRequest{Namespace: "infra", Name: "none"}))
	if err != nil || len(empty.Msg.GetReceipts()) != 0 {
		t.Fatalf("unknown resource: %v %v", empty, err)
	}

	tests := []struct {
		name  string
		req   *lavav1.VerifyChainRequest
		ok    bool
		fails int
	}{
		{"embedded keys", &lavav1.VerifyChainRequest{Namespace: "infra", Name: "vpc"}, true, 0},
		{"signer's key, required", &lavav1.VerifyChainRequest{Namespace: "infra", Name: "vpc", RequireSignatures: true, PublicKey: s.PublicKey()}, true, 0},
		{"wrong key", &lavav1.VerifyChainRequest{Namespace: "infra", Name: "vpc", PublicKey: receipttest.OtherSigner(t).PublicKey()}, false, len(receipttest.Lifecycle)},
	}
	for _, tt := range tests {
		res, err := client.VerifyChain(t.Context(), connect.NewRequest(tt.req))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Msg.GetOk() != tt.ok || len(res.Msg.GetFailures()) != tt.fails || res.Msg.GetLength() != uint64(len(receipttest.Lifecycle)) || len(res.Msg.GetHeadHash()) != 32 {
			t.Fatalf("%s: %v", tt.name, res.Msg)
		}
	}
	for _, req := range []*lavav1.VerifyChainRequest{{Namespace: "infra"}, {Namespace: "infra", Name: "vpc", PublicKey: []byte{1, 2}}} {
		_, err := client.VerifyChain(t.Context(), connect.NewRequest(req))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("VerifyChain(%v): %v, want invalid_argument", req, err)
		}
	}
}

// startHandler serves ReceiptService on a real HTTP server and returns a client.
func startHandler(t testing.TB, js jetstream.JetStream) lavav1connect.ReceiptServiceClient {
	t.Helper()
	return serveHandler(t, attest.NewHandler(js, nil, nil))
}

// startHandlerReporting is startHandler with foreign messages reported as anomalies.
func startHandlerReporting(t testing.TB, js jetstream.JetStream) lavav1connect.ReceiptServiceClient {
	t.Helper()
	return serveHandler(t, attest.NewHandler(js, nil, attest.ForeignReporter(bus.NewPublisher(js), nil)))
}

func serveHandler(t testing.TB, h *attest.Handler) lavav1connect.ReceiptServiceClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(h.Mount())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return lavav1connect.NewReceiptServiceClient(hs.Client(), hs.URL)
}

// TestService_perResourceOrder: with eight handlers racing for a backlog of 4 resources' 60
// transitions each (interleaved), every resource's chain holds its receipts in the order of
// its transitions (the stream order of its events), and each chain verifies. Without the
// consumer's per-resource order (bus.ConsumeOptions.OrderKey) this fails in every run.
func TestService_perResourceOrder(t *testing.T) {
	t.Parallel()
	srv := startBus(t)
	js := srv.JetStream()
	s := receipttest.Signer(t)
	svc := attest.NewService(js, attest.NewStore(js, attest.StoreOptions{Signer: s}), attest.ServiceOptions{Concurrency: 8})
	const resources, transitions = 4, 60
	pub := bus.NewPublisher(js)
	want := map[string][]string{}
	prev := map[string]lavav1.Phase{}
	for i := range transitions {
		for r := range resources {
			name := fmt.Sprintf("r%d", r)
			to := receipttest.Lifecycle[i%len(receipttest.Lifecycle)]
			pc := receipttest.PhaseChanged("fleet", name, prev[name], to, r*1000+i)
			prev[name] = to
			want[name] = append(want[name], pc.GetEnvelope().GetEventId())
			if _, err := pub.PublishEvent(t.Context(), pc); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(t, svc.Run) // the whole backlog is there: the handlers race for it
	for r := range resources {
		name := fmt.Sprintf("r%d", r)
		var chain []*lavav1.Receipt
		eventually(t, 30*time.Second, name+" attested", func() bool {
			chain = readChain(t, js, "fleet", name)
			return len(chain) >= transitions
		})
		var got []string
		for _, rc := range chain {
			got = append(got, receipttest.PayloadEventID(rc.GetPayload()))
		}
		if !slices.Equal(got, want[name]) {
			t.Fatalf("%s: receipts in the order %v, want the transitions' order %v", name, got, want[name])
		}
		if res := readmodel.Verify(chain, readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}); !res.OK() {
			t.Fatal(receipttest.Messages(res))
		}
	}
}
