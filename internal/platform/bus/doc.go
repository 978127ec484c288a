// Package bus is Lava's JetStream layer: the one declaration of every stream, subject, durable
// consumer, KV bucket and object store (docs/architecture.md section 3), the reversible escaping of Kubernetes
// names into subject tokens and KV keys, typed publishing of protobuf events, the bounded,
// at-least-once consume loop every service runs, the generation watermarks and per-resource
// leases that make redelivery and replica races harmless, and the BLAKE3-addressed artifact
// store that keeps large payloads out of messages.
//
// # Subjects and keys
//
// Subject and key layouts are a public contract, written down in docs/events.md ("Subjects and
// the escaping of names"). [EscapeToken] and [UnescapeToken] are total and inverse: every string
// becomes a non-empty token of [-0-9A-Za-z_=] and comes back unchanged.
//
// # Delivery
//
// [Consume] runs a service's durable pull consumer with bounded concurrency. A message is acked
// only after its handler returned nil; a transient error naks it with exponential delay; a
// [Permanent] error, an undecodable body or the last allowed delivery terminates it and reports
// it to the poison callback. Each handler run has a deadline (ConsumeOptions.HandlerTimeout);
// a handler still running HandlerGrace after its context ended is abandoned and its message
// terminated and reported ([PoisonHandlerTimeout]), so a wedged handler never holds a worker.
// An event over the server's max_payload is a [PayloadTooLargeError]; [Publisher.Fits] tells
// before publishing. Handlers must be
// idempotent: take the resource's lease ([Leases]), check the generation ([Watermarks]), then
// act.
//
// # Usage
//
// A service creates the topology at start-up, then publishes and consumes:
//
//	if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{Replicas: 3}); err != nil { ... }
//	pub := bus.NewPublisher(js)
//	_, err := pub.PublishEvent(ctx, &lavav1.Applied{Envelope: env, ...}) // lava.v1.phase.<ns>.<name>.applied
//
//	leases, _ := bus.NewLeases(ctx, js, podName, metrics)
//	marks, _ := bus.NewWatermarks(ctx, js, bus.ServiceApplier, metrics)
//	err = bus.Consume(ctx, js, bus.ConsumeOptions{
//		Stream: bus.StreamPhases, Consumer: bus.ServiceApplier, Concurrency: 4,
//		OnPoison: raiseAnomaly, Logger: log, Metrics: metrics,
//	}, func(ctx context.Context, m *bus.Message) error {
//		res := m.Envelope.GetResource()
//		return leases.Hold(ctx, res.GetNamespace(), res.GetName(), func(ctx context.Context) error {
//			current, err := marks.Advance(ctx, res.GetNamespace(), res.GetName(), m.Envelope.GetGeneration())
//			if err != nil || !current {
//				return err // nil for a stale event: ack and drop it
//			}
//			return apply(ctx, m.Event.(*lavav1.Synthesized)) // idempotent, keyed by event_id
//		})
//	})
package bus
