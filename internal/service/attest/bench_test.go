package attest_test

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/readmodel"
	"github.com/lava-operator/lava/internal/readmodel/receipttest"
	"github.com/lava-operator/lava/internal/service/attest"
)

// BenchmarkAppend measures signed receipts appended per second to LAVA_RECEIPTS on a real
// in-process nats-server: into one chain (every append reads the tail it just wrote), and into
// 64 chains from parallel goroutines.
func BenchmarkAppend(b *testing.B) {
	b.Run("one_chain", func(b *testing.B) {
		srv := startBus(b)
		store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: receipttest.Signer(b)})
		b.ResetTimer()
		for i := range b.N {
			if _, err := store.Append(b.Context(), request("bench", "one", lavav1.Phase_PHASE_APPLIED, i)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
	})
	b.Run("64_chains_parallel", func(b *testing.B) {
		srv := startBus(b)
		store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: receipttest.Signer(b)})
		var n atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(n.Add(1))
				if _, err := store.Append(b.Context(), request("bench", fmt.Sprintf("r%d", i%64), lavav1.Phase_PHASE_APPLIED, i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
	})
}

// BenchmarkVerify measures receipts verified per second: VerifyChain of a 1,000-receipt signed
// chain through ReceiptService on a real HTTP server reading a real nats-server (with the
// verifier's key and signatures required), and the same chain verified in memory.
func BenchmarkVerify(b *testing.B) {
	const length = 1000
	srv := startBus(b)
	js := srv.JetStream()
	s := receipttest.Signer(b)
	store := attest.NewStore(js, attest.StoreOptions{Signer: s})
	for i := range length {
		if _, err := store.Append(b.Context(), request("bench", "chain", lavav1.Phase_PHASE_APPLIED, i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("rpc", func(b *testing.B) {
		client := startHandler(b, js)
		req := &lavav1.VerifyChainRequest{Namespace: "bench", Name: "chain", RequireSignatures: true, PublicKey: s.PublicKey()}
		b.ResetTimer()
		for range b.N {
			res, err := client.VerifyChain(b.Context(), connect.NewRequest(req))
			if err != nil {
				b.Fatal(err)
			}
			if !res.Msg.GetOk() || res.Msg.GetLength() != length {
				b.Fatalf("chain: ok %v, %d receipts", res.Msg.GetOk(), res.Msg.GetLength())
			}
		}
		b.ReportMetric(float64(b.N*length)/b.Elapsed().Seconds(), "receipts/s")
	})
	b.Run("in_memory", func(b *testing.B) {
		chain := readChain(b, js, "bench", "chain")
		opts := readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}
		b.ResetTimer()
		for range b.N {
			if res := readmodel.Verify(chain, opts); !res.OK() {
				b.Fatal(receipttest.Messages(res))
			}
		}
		b.ReportMetric(float64(b.N*length)/b.Elapsed().Seconds(), "receipts/s")
	})
}

// BenchmarkHandle measures phase events attested per second by one Service on a real
// in-process nats-server, the events of 16 resources or more handed in stream order: with Handle (each
// event first looks for earlier events of its resource not yet receipted: two message gets on
// LAVA_PHASES; docs/design/0018-receipt-order-across-replicas.md) and with Record (appended
// after the head, no look-up), so the cost of phase order is the difference.
func BenchmarkHandle(b *testing.B) {
	for _, mode := range []string{"handle", "record"} {
		b.Run(mode, func(b *testing.B) {
			srv := startBus(b)
			// At most 32 events per resource: LAVA_PHASES keeps 64 per subject.
			resources := max(16, b.N/32+1)
			f := newOrderFixture(b, srv.JetStream(), "bench", resources, b.N/resources+1)
			rep := newReplica(b, srv, receipttest.Signer(b), nil)
			var msgs []*bus.Message
			for _, name := range f.names {
				msgs = append(msgs, f.phases[name]...)
			}
			slices.SortFunc(msgs, func(x, y *bus.Message) int { return cmp.Compare(x.StreamSeq, y.StreamSeq) })
			b.ResetTimer()
			for i := range b.N {
				var err error
				if mode == "handle" {
					err = rep.svc.Handle(b.Context(), msgs[i])
				} else {
					_, err = rep.svc.Record(b.Context(), msgs[i].Event, msgs[i].Published)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
