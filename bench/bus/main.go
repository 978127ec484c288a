package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

func main() {
	n := flag.Int("n", 100000, "events for the throughput run")
	publishers := flag.Int("publishers", 8, "concurrent publishers in the throughput run")
	concurrency := flag.Int("concurrency", 64, "handler concurrency of the consumer in the throughput run")
	batch := flag.Int("batch", 256, "events per PublishBatch in the batched throughput run")
	rate := flag.Int("rate", 1000, "events per second in the latency run")
	duration := flag.Duration("duration", 10*time.Second, "length of the latency run")
	memory := flag.Bool("memory", false, "memory instead of file storage for the streams")
	inProcess := flag.Bool("inprocess", false, "connect to the server in memory instead of over loopback TCP")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *n, *publishers, *concurrency, *batch, *rate, *duration, *memory, *inProcess); err != nil {
		fmt.Fprintln(os.Stderr, "bench/bus:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, publishers, concurrency, batch, rate int, duration time.Duration, memory, inProcess bool) error {
	dir, err := os.MkdirTemp("", "lava-bench-bus-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := natstest.StartJetStream(dir)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	js, conn := srv.JetStream(), "loopback TCP"
	if inProcess {
		nc, ijs, err := srv.DialInProcess()
		if err != nil {
			return err
		}
		defer nc.Close()
		js, conn = ijs, "in-process connection"
	}
	topo, storage := bus.TopologyOptions{}, "file"
	if memory {
		topo.Storage, storage = jetstream.MemoryStorage, "memory"
	}
	if err := bus.EnsureTopology(ctx, js, topo); err != nil {
		return err
	}
	fmt.Printf("bench/bus: in-process nats-server (%s storage, %s), GOMAXPROCS=%d, %s\n", storage, conn, runtime.GOMAXPROCS(0), runtime.Version())

	for _, b := range []int{0, batch} {
		tp, err := measureThroughput(ctx, one(js), fmt.Sprintf("throughput-%d", b), n, publishers, concurrency, b)
		if err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
		how := fmt.Sprintf("%d publishers, each waiting for every ack", publishers)
		if b > 0 {
			how = fmt.Sprintf("%d publishers, PublishBatch of %d", publishers, b)
		}
		fmt.Printf("throughput: %d events published and consumed in %v: %.0f events/s (%s; consumer concurrency %d)\n",
			tp.Events, tp.Elapsed.Round(time.Millisecond), tp.PerSec, how, concurrency)
	}

	lat, err := measureLatency(ctx, one(js), "latency", rate, duration)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	fmt.Printf("latency at %d events/s for %v (%d events), publish to handler: p50 %v  p99 %v  p99.9 %v  max %v\n",
		lat.Rate, duration, lat.Events, lat.P50.Round(time.Microsecond), lat.P99.Round(time.Microsecond),
		lat.P999.Round(time.Microsecond), lat.Max.Round(time.Microsecond))
	return nil
}
