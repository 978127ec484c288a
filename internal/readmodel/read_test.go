package readmodel_test

import (
	"testing"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
	"github.com/lava-operator/lava/internal/readmodel"
)

// TestReadChain_notAReceipt: a message on a chain's subject that is not a receipt is skipped
// and returned as foreign, never decoded as a receipt.
func TestReadChain_notAReceipt(t *testing.T) {
	t.Parallel()
	srv := natstest.RunJetStream(t)
	if err := bus.EnsureTopology(t.Context(), srv.JetStream(), bus.TopologyOptions{}); err != nil {
		t.Fatalf("EnsureTopology: %v", err)
	}
	m, err := bus.Encode(bus.ReceiptSubject("ns", "x"), &lavav1.ReceiptAppended{Envelope: &lavav1.Envelope{EventId: "e1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.JetStream().PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	c, err := readmodel.ReadChain(t.Context(), srv.JetStream(), "ns", "x", readmodel.VerifyOptions{})
	if err != nil {
		t.Fatalf("the chain became unreadable: %v", err)
	}
	if len(c.Receipts) != 0 || len(c.Foreign) != 1 || c.Foreign[0].Reason != readmodel.ForeignNotAReceipt {
		t.Fatalf("a ReceiptAppended on the receipt subject: receipts %v, foreign %v", c.Receipts, c.Foreign)
	}
}
