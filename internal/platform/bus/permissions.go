package bus

import (
	"fmt"
	"slices"
)

// Identities on the bus besides the seven services (docs/security.md, "Bus").
const (
	// IdentitySubscriber reads the public alerting subjects (lava.anomaly.>) and the phase
	// events, live or by message, and nothing else: no artifact store, no state, no KV, no
	// resource events, no receipts' KV, no consumer of another identity.
	IdentitySubscriber = "subscriber"
	// IdentityBootstrap is the admin identity: it creates and updates the topology
	// ([EnsureTopology]) and is the identity of the CLI's receipts and state commands. It may
	// publish and subscribe to everything.
	IdentityBootstrap = "bootstrap"
)

// Identities lists every identity [Topology.Permissions] knows: the services in pipeline
// order, then the subscriber and the bootstrap identity.
func Identities() []string {
	return append(Services(), IdentitySubscriber, IdentityBootstrap)
}

// InboxPrefix is the reply-subject prefix of identity's connections ("_INBOX_applier"):
// [Connect] sets it (nats.CustomInboxPrefix) and [Topology.Permissions] lets identity
// subscribe only below it, so no identity can read another's replies (pull-consumer
// deliveries, publish acks, KV and object store reads).
func InboxPrefix(identity string) string { return "_INBOX_" + identity }

// Permissions are the publish and subscribe allow lists of one NATS identity, in the
// nats-server's subject syntax. Everything not allowed is denied.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// JetStream API subjects (the nats-server's JetStream API reference).
const (
	jsAPI = "$JS.API."
	jsAck = "$JS.ACK."
	jsFC  = "$JS.FC."
)

// kvStream and objStream are the streams behind a KV bucket and an object store (nats.go
// jetstream: "KV_<bucket>", "OBJ_<bucket>").
func kvStream(bucket string) string  { return "KV_" + bucket }
func objStream(bucket string) string { return "OBJ_" + bucket }

// Permissions returns identity's allow lists, generated from the declaration: its durable
// consumers (t.Consumers) and its access entry (t.Access). A service may publish only the
// subjects it writes, fetch from and ack only its own durable consumers (and receive their
// max-deliveries advisories), read only the streams and buckets it uses, write only the
// buckets it writes, and receive only on its own inbox ([InboxPrefix]); it has no JetStream
// admin right (no stream, consumer or bucket create, update or delete, except ordered
// consumers on the streams it scans). The subscriber may subscribe to lava.anomaly.> and
// lava.v1.phase.> and read LAVA_ANOMALIES and LAVA_PHASES by message. The bootstrap
// identity may do everything. An unknown identity is an error.
func (t Topology) Permissions(identity string) (Permissions, error) {
	var p Permissions
	pub := func(s ...string) { p.Publish = append(p.Publish, s...) }
	sub := func(s ...string) { p.Subscribe = append(p.Subscribe, s...) }
	readStream := func(stream string) {
		pub(jsAPI+"STREAM.INFO."+stream, jsAPI+"STREAM.MSG.GET."+stream,
			jsAPI+"DIRECT.GET."+stream, jsAPI+"DIRECT.GET."+stream+".>")
	}
	scanStream := func(stream string) {
		readStream(stream)
		// nats.go creates an ordered consumer with "CONSUMER.CREATE.<stream>.<name>[.<filter>]"
		// (older servers: "CONSUMER.CREATE.<stream>") and pulls from it; its deliveries reach
		// the identity's inbox.
		pub(jsAPI+"CONSUMER.CREATE."+stream, jsAPI+"CONSUMER.CREATE."+stream+".>",
			jsAPI+"CONSUMER.INFO."+stream+".*", jsAPI+"CONSUMER.DELETE."+stream+".*",
			jsAPI+"CONSUMER.MSG.NEXT."+stream+".*", jsFC+stream+".>")
	}
	switch {
	case identity == IdentityBootstrap:
		return Permissions{Publish: []string{">"}, Subscribe: []string{">"}}, nil
	case identity == IdentitySubscriber:
		sub(PrefixAnomaly+">", PrefixPhase+">", InboxPrefix(identity)+".>")
		readStream(StreamAnomalies)
		readStream(StreamPhases)
		return p, nil
	}
	a, ok := t.AccessOf(identity)
	if !ok {
		return Permissions{}, fmt.Errorf("bus: unknown identity %q (want one of %v)", identity, Identities())
	}
	sub(InboxPrefix(identity) + ".>")
	pub(a.Publish...)
	read := slices.Clone(a.ReadStreams)
	for _, c := range t.Consumers {
		if c.Config.Durable != identity {
			continue
		}
		s, d := c.Stream, c.Config.Durable
		pub(jsAPI+"CONSUMER.INFO."+s+"."+d, jsAPI+"CONSUMER.MSG.NEXT."+s+"."+d, jsAck+s+"."+d+".>")
		sub("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + s + "." + d)
		read = append(read, s)
	}
	for _, s := range a.ScanStreams {
		scanStream(s)
	}
	for _, b := range a.KeyValues {
		scanStream(kvStream(b.Bucket)) // Get, Keys and Watch
		if b.Write {
			pub("$KV." + b.Bucket + ".>")
		}
	}
	for _, b := range a.ObjectStores {
		scanStream(objStream(b.Bucket)) // an object's meta by direct get, its chunks by an ordered consumer
		if b.Write {
			// Put writes chunks and meta, and purges the chunks of the object it replaces.
			pub("$O."+b.Bucket+".>", jsAPI+"STREAM.PURGE."+objStream(b.Bucket))
		}
	}
	slices.Sort(read)
	for _, s := range slices.Compact(read) {
		readStream(s)
	}
	p.Publish = compact(p.Publish)
	p.Subscribe = compact(p.Subscribe)
	return p, nil
}

func compact(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
