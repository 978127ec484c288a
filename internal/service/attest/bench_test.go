package attest_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/service/attest"
)

// BenchmarkAppend measures signed receipts appended per second to LAVA_RECEIPTS on a real
// in-process nats-server: into one chain (every append reads the tail it just wrote), and into
// 64 chains from parallel goroutines.
func BenchmarkAppend(b *testing.B) {
	b.Run("one_chain", func(b *testing.B) {
		srv := startBus(b)
		store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: testSigner(b)})
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
		store := attest.NewStore(srv.JetStream(), attest.StoreOptions{Signer: testSigner(b)})
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
	s := testSigner(b)
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
		opts := attest.VerifyOptions{RequireSignatures: true, PublicKey: s.PublicKey()}
		b.ResetTimer()
		for range b.N {
			if res := attest.Verify(chain, opts); !res.OK() {
				b.Fatal(messages(res))
			}
		}
		b.ReportMetric(float64(b.N*length)/b.Elapsed().Seconds(), "receipts/s")
	})
}
