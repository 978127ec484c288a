// Command bus measures Lava's JetStream bus through a real in-process nats-server: publish-to-
// consume throughput (events/s) and round-trip latency (p50/p99) at a steady event rate, using
// the production topology, [bus.Publisher] and [bus.Consume]. `go run ./bench/bus` prints the
// figures; `go test -bench . ./bench/bus` runs the same measurements as benchmarks.
package main
