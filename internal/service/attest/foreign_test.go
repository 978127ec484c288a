package attest_test

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// TestForeignMessages_skippedAndReported: on a nats-server with the generated authorization,
// attest runs as its own identity; the bootstrap (admin) identity, the only other one that may
// publish on receipt subjects, injects foreign messages into a live chain (garbage, a receipt
// with a broken signature, a receipt validly signed by another key whose prev_hash is wrong)
// and into a chain that has no receipt yet. attest's next appends continue the real chains (the
// receipt head ReceiptAppended announces is the real one), each foreign message is reported once
// as a critical foreign_receipt anomaly on lava.anomaly.>, ReadChain and ReceiptService's
// VerifyChain skip them and the real chains verify with the pinned key. The test fails if a
// chain becomes unreadable.
func TestForeignMessages_skippedAndReported(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	keys, err := natsauth.GenerateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	topo := bus.Declare(bus.TopologyOptions{})
	users, err := natsauth.Users(topo, keys)
	if err != nil {
		t.Fatal(err)
	}
	seed := func(id string) string { return filepath.Join(dir, natsauth.SeedFileName(id)) }
	srv := natstest.Run(t, natstest.Config{Nkeys: users, Client: []nats.Option{
		nats.CustomInboxPrefix(bus.InboxPrefix(bus.IdentityBootstrap)), mustNkey(t, seed(bus.IdentityBootstrap))}})
	admin := srv.JetStream()
	if err := bus.EnsureTopology(ctx, admin, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	nc, js, err := bus.Connect(bus.ConnectOptions{URL: srv.URL(), Name: "attest", Identity: bus.ServiceAttest, NKeyFile: seed(bus.ServiceAttest)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	signer := receipttest.Signer(t)
	onForeign := attest.ForeignReporter(bus.NewPublisher(js), nil)
	svc := attest.NewService(js, attest.NewStore(js, attest.StoreOptions{Signer: signer, OnForeign: onForeign}), attest.ServiceOptions{})
	run(t, svc.Run)

	pub := bus.NewPublisher(admin) // stands in for the watcher, which publishes PhaseChanged
	phase := func(name string, n int) {
		t.Helper()
		if _, err := pub.PublishEvent(ctx, receipttest.PhaseChanged("infra", name, lavav1.Phase_PHASE_UNSPECIFIED, receipttest.Lifecycle[n%len(receipttest.Lifecycle)], n)); err != nil {
			t.Fatal(err)
		}
	}
	pinned := readmodel.VerifyOptions{RequireSignatures: true, PublicKey: signer.PublicKey()}
	read := func(name string) *readmodel.Chain {
		t.Helper()
		c, err := readmodel.ReadChain(ctx, admin, "infra", name, pinned)
		if err != nil {
			t.Fatalf("the chain of infra/%s is unreadable: %v", name, err)
		}
		return c
	}
	waitLen := func(name string, n int) *readmodel.Chain {
		t.Helper()
		var c *readmodel.Chain
		eventually(t, 15*time.Second, fmt.Sprintf("infra/%s has %d receipts", name, n), func() bool { c = read(name); return len(c.Receipts) >= n })
		return c
	}

	phase("web", 0)
	phase("web", 1)
	head := waitLen("web", 2).Receipts[1]

	// The admin injects three foreign messages after the head.
	subject := bus.ReceiptSubject("infra", "web")
	inject := func(subject string, data []byte) {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set(bus.HeaderSchema, "lava.v1.Receipt")
		m.Data = data
		if _, err := admin.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	inject(subject, []byte("not a receipt \xff\xff"))
	badSig, err := readmodel.NewReceipt(head, readmodel.KindOutcome, readmodel.OutcomeFromPhaseChanged(receipttest.PhaseChanged("infra", "web", 0, lavav1.Phase_PHASE_FAILED, 90)), time.Now(), signer)
	if err != nil {
		t.Fatal(err)
	}
	badSig.Signature.Sig[0] ^= 0xff
	inject(subject, marshal(t, badSig))
	other, err := readmodel.ParseSigner(strings.Repeat("42", 32))
	if err != nil {
		t.Fatal(err)
	}
	fakeHead := proto.Clone(head).(*lavav1.Receipt)
	fakeHead.ContentHash = make([]byte, 32)
	_, _ = rand.Read(fakeHead.ContentHash)
	wrongPrev, err := readmodel.NewReceipt(fakeHead, readmodel.KindOutcome, readmodel.OutcomeFromPhaseChanged(receipttest.PhaseChanged("infra", "web", 0, lavav1.Phase_PHASE_FAILED, 91)), time.Now(), other)
	if err != nil {
		t.Fatal(err)
	}
	inject(subject, marshal(t, wrongPrev))
	// A chain whose first message is foreign.
	inject(bus.ReceiptSubject("infra", "fresh"), []byte("garbage"))

	phase("web", 2)
	phase("fresh", 3)

	// The receipt head attest announces continues the real chain.
	phases, err := admin.Stream(ctx, bus.StreamPhases)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "ReceiptAppended of infra/web's receipt 2", func() bool {
		m, err := phases.GetLastMsgForSubject(ctx, bus.PhaseSubject("infra", "web", attest.EventReceiptAppended))
		if err != nil {
			return false
		}
		var ra lavav1.ReceiptAppended
		if err := proto.Unmarshal(m.Data, &ra); err != nil {
			t.Fatal(err)
		}
		return ra.GetSequence() >= 2
	})

	// Each foreign message is reported once, as a critical foreign_receipt anomaly. attest records
	// those anomalies in the chains too, so infra/web ends with 3 outcomes and 3 anomaly receipts.
	anomalies := map[string][]string{}
	eventually(t, 15*time.Second, "four foreign_receipt anomalies", func() bool {
		anomalies = readAnomalies(t, admin, bus.ForeignReceiptAnomalySubject)
		return len(anomalies["infra/web"])+len(anomalies["infra/fresh"]) >= 4
	})
	slices.Sort(anomalies["infra/web"])
	if got, want := anomalies["infra/web"], []string{"bad_signature", "does_not_follow", "not_a_receipt"}; !slices.Equal(got, want) {
		t.Errorf("infra/web anomalies %v, want %v", got, want)
	}
	if got := anomalies["infra/fresh"]; !slices.Equal(got, []string{"not_a_receipt"}) {
		t.Errorf("infra/fresh anomalies %v, want [not_a_receipt]", got)
	}

	for name, want := range map[string]int{"web": 6, "fresh": 2} {
		c := waitLen(name, want)
		if len(c.Receipts) != want {
			t.Errorf("infra/%s: %d receipts, want %d", name, len(c.Receipts), want)
		}
		if res := readmodel.Verify(c.Receipts, pinned); !res.OK() {
			t.Errorf("infra/%s does not verify: %v", name, receipttest.Messages(res))
		}
		wantForeign := map[string]int{"web": 3, "fresh": 1}[name]
		if len(c.Foreign) != wantForeign {
			t.Errorf("infra/%s: foreign %v, want %d", name, c.Foreign, wantForeign)
		}
		// ReceiptService skips them as well.
		client := startHandlerReporting(t, admin)
		res, err := client.VerifyChain(ctx, connect.NewRequest(&lavav1.VerifyChainRequest{
			Namespace: "infra", Name: name, RequireSignatures: true, PublicKey: signer.PublicKey()}))
		if err != nil {
			t.Fatalf("VerifyChain infra/%s: %v", name, err)
		}
		if !res.Msg.GetOk() || res.Msg.GetLength() != uint64(want) {
			t.Errorf("VerifyChain infra/%s: %v", name, res.Msg)
		}
	}
	// No more anomalies than foreign messages: a report is stored once per message.
	time.Sleep(300 * time.Millisecond)
	final := readAnomalies(t, admin, bus.ForeignReceiptAnomalySubject)
	if n := len(final["infra/web"]) + len(final["infra/fresh"]); n != 4 {
		t.Errorf("%d foreign_receipt anomalies stored, want 4: %v", n, final)
	}
}

func mustNkey(t *testing.T, seedFile string) nats.Option {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAnomalies returns the reasons of the anomalies stored on subject, per "ns/name".
func readAnomalies(t *testing.T, js jetstream.JetStream, subject string) map[string][]string {
	t.Helper()
	stream, err := js.Stream(t.Context(), bus.StreamAnomalies)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	if info.State.Subjects[subject] == 0 {
		return out
	}
	cons, err := stream.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(int(info.State.Subjects[subject]), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		var an lavav1.AnomalyDetected
		if err := protojson.Unmarshal(m.Data(), &an); err != nil {
			t.Fatalf("anomaly %s: %v", m.Data(), err)
		}
		if an.GetExtensionKind() != attest.ExtensionForeignReceipt || an.GetSeverity() != lavav1.Severity_SEVERITY_CRITICAL {
			t.Errorf("anomaly %v", &an)
		}
		key := an.GetSource().GetNamespace() + "/" + an.GetSource().GetName()
		out[key] = append(out[key], an.GetMetadata()["reason"])
	}
	return out
}
