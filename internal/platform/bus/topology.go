package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names (docs/architecture.md section 3).
const (
	// StreamResources holds ResourceObserved and DeletionRequested (written by the watcher).
	StreamResources = "LAVA_RESOURCES"
	// StreamPhases holds the pipeline's phase events (written by every service).
	StreamPhases = "LAVA_PHASES"
	// StreamCommands is the work queue of ReapplyRequested and RetryRequested (written by viggy).
	StreamCommands = "LAVA_COMMANDS"
	// StreamAnomalies holds AnomalyDetected as protojson (written by anomaly; public).
	StreamAnomalies = "LAVA_ANOMALIES"
	// StreamReceipts holds the per-resource receipt chains (written by attest; never discards).
	StreamReceipts = "LAVA_RECEIPTS"
)

// KV bucket and object store names (docs/architecture.md section 3).
const (
	// BucketState holds per resource ([ResourceKey]) the state serial, lineage, digest and lock;
	// the state body is an artifact.
	BucketState = "lava-state"
	// BucketLeases holds per-resource work leases ([ResourceKey]); entries expire after
	// [TopologyOptions].LeaseTTL unless renewed. See [Leases].
	BucketLeases = "lava-leases"
	// BucketWatermarks holds the newest generation each service has seen per resource
	// ([WatermarkKey]). See [Watermarks].
	BucketWatermarks = "lava-watermarks"
	// BucketDriftSchedule holds drift's per-resource scan schedule ([ResourceKey]).
	BucketDriftSchedule = "lava-drift-schedule"
	// BucketViggy holds viggy's per-resource record: effective policy, last decision, held plan
	// id, scheduled retries and escalations ([ResourceKey]).
	BucketViggy = "lava-viggy"
	// BucketAnomalyWindows holds the anomaly service's de-duplication windows, one per
	// fingerprint (or "<fingerprint>.escalation.<tier>"), as JSON; entries expire after
	// max(2 × [TopologyOptions].AnomalyWindow, 1h) without a sighting.
	BucketAnomalyWindows = "lava-anomaly-windows"
	// BucketAnomalyProgress holds per resource ([ResourceKey]) the working phase it is in and
	// since when, for the anomaly service's progress deadline.
	BucketAnomalyProgress = "lava-anomaly-progress"
	// ObjectStoreArtifacts holds Terraform JSON, plans and state bodies by BLAKE3 digest. See
	// [Artifacts].
	ObjectStoreArtifacts = "lava-artifacts"
)

// Service names: each consuming service has one durable pull consumer of this name on every
// stream it reads, shared by all its replicas. Consumer names never contain resource names.
const (
	ServiceWatcher = "watcher"
	ServiceSynth   = "synth"
	ServiceApplier = "applier"
	ServiceDrift   = "drift"
	ServiceViggy   = "viggy"
	ServiceAnomaly = "anomaly"
	ServiceAttest  = "attest"
)

// Services lists every service name, in pipeline order.
func Services() []string {
	return []string{ServiceWatcher, ServiceSynth, ServiceApplier, ServiceDrift, ServiceViggy, ServiceAnomaly, ServiceAttest}
}

// Retention figures of the topology.
const (
	// ResourceHistoryPerSubject is how many ResourceObserved/DeletionRequested messages
	// LAVA_RESOURCES keeps per subject (per resource and event).
	ResourceHistoryPerSubject = 16
	// PhaseHistoryPerSubject is how many messages LAVA_PHASES keeps per subject (per resource
	// and event): enough to replay a resource's recent history, bounded by the number of
	// resources.
	PhaseHistoryPerSubject = 64
	// AnomalyMaxAge is how long LAVA_ANOMALIES keeps an anomaly.
	AnomalyMaxAge = 30 * 24 * time.Hour
	// StateHistory is how many revisions lava-state keeps per key.
	StateHistory = 8
)

// TopologyOptions tunes [Declare]. The zero value is valid: every field has a default.
type TopologyOptions struct {
	// Replicas is the replica count of every stream, bucket and object store: 1 in tests and
	// `lava up`, 3 on a production NATS cluster. Default 1.
	Replicas int
	// Storage is file (default) or memory storage.
	Storage jetstream.StorageType
	// DuplicateWindow is how long a stream remembers Nats-Msg-Id values (event ids) to drop a
	// re-published event. Default 10m.
	DuplicateWindow time.Duration
	// LeaseTTL is how long a lease in lava-leases lives without renewal (the bucket's TTL).
	// Default 30s.
	LeaseTTL time.Duration
	// MaxDeliver is how many times a consumer delivers one message before [Consume]
	// terminates it as poison. Default 10.
	MaxDeliver int
	// BackOff is the server's redelivery schedule for messages whose handler neither acked nor
	// naked (a crashed or hung replica): the first value is the ack wait, later values apply to
	// later deliveries. Must not be longer than MaxDeliver. Default 30s, 1m, 2m, 5m.
	// [Consume] sends InProgress heartbeats so a long handler is never redelivered.
	BackOff []time.Duration
	// MaxAckPending bounds unacknowledged messages per consumer across all replicas.
	// Default 1000.
	MaxAckPending int
	// AnomalyWindow is the anomaly service's de-duplication window (its routing
	// configuration's window): lava-anomaly-windows entries expire after
	// max(2 × AnomalyWindow, 1h). Default 10m (so a TTL of 1h); every window up to 30m gives
	// the same TTL.
	AnomalyWindow time.Duration
}

// defaultMaxAckPending is [TopologyOptions].MaxAckPending when unset.
const defaultMaxAckPending = 1000

// DefaultAnomalyWindow is [TopologyOptions].AnomalyWindow when unset.
const DefaultAnomalyWindow = 10 * time.Minute

// AnomalyWindowsTTL is the TTL of lava-anomaly-windows for an anomaly window:
// max(2 × window, 1h); window <= 0 means [DefaultAnomalyWindow].
func AnomalyWindowsTTL(window time.Duration) time.Duration {
	if window <= 0 {
		window = DefaultAnomalyWindow
	}
	return max(2*window, time.Hour)
}

func (o TopologyOptions) withDefaults() TopologyOptions {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 10 * time.Minute
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = 10
	}
	if len(o.BackOff) == 0 {
		o.BackOff = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute}
	}
	if len(o.BackOff) > o.MaxDeliver {
		o.BackOff = o.BackOff[:o.MaxDeliver]
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = defaultMaxAckPending
	}
	if o.AnomalyWindow <= 0 {
		o.AnomalyWindow = DefaultAnomalyWindow
	}
	return o
}

// ConsumerSpec is one durable pull consumer: the stream it reads and its configuration
// (Durable is the service name).
type ConsumerSpec struct {
	// Stream is the stream the consumer reads.
	Stream string
	// Config is its configuration; Durable and Name are the service name.
	Config jetstream.ConsumerConfig
}

// Topology is every stream, consumer, KV bucket and object store Lava uses.
type Topology struct {
	// Streams: LAVA_RESOURCES, LAVA_PHASES, LAVA_COMMANDS, LAVA_ANOMALIES, LAVA_RECEIPTS.
	Streams []jetstream.StreamConfig
	// Consumers: one durable pull consumer per service and stream it reads.
	Consumers []ConsumerSpec
	// KeyValues: lava-state, lava-leases, lava-watermarks, lava-drift-schedule, lava-viggy,
	// lava-anomaly-windows, lava-anomaly-progress.
	KeyValues []jetstream.KeyValueConfig
	// ObjectStores: lava-artifacts.
	ObjectStores []jetstream.ObjectStoreConfig
	// Access: per service, what it publishes, which streams it reads by message and which
	// buckets it uses, as docs/events.md's tables say. With Consumers it is the input of
	// [Topology.Permissions]; one entry per service, in [Services] order.
	Access []Access
}

// Access is what one service does with the topology besides reading its durable consumers.
type Access struct {
	// Service is the service name (one of [Services]).
	Service string
	// Publish lists the subject filters the service writes (events, commands, anomalies,
	// receipts).
	Publish []string
	// ReadStreams lists streams whose messages the service reads by sequence or by last
	// message of a subject (jetstream.Stream.GetMsg, GetLastMsgForSubject). The streams of its
	// durable consumers are implied.
	ReadStreams []string
	// ScanStreams lists streams the service reads with ordered (ephemeral) consumers.
	ScanStreams []string
	// KeyValues and ObjectStores list the buckets the service uses.
	KeyValues    []BucketUse
	ObjectStores []BucketUse
}

// BucketUse is one bucket a service uses; Write is false for a read-only use.
type BucketUse struct {
	Bucket string
	Write  bool
}

// AccessOf returns the access entry of service, and false if there is none.
func (t Topology) AccessOf(service string) (Access, bool) {
	for _, a := range t.Access {
		if a.Service == service {
			return a, true
		}
	}
	return Access{}, false
}

// Consumer returns the spec of service's consumer on stream, and false if there is none.
func (t Topology) Consumer(stream, service string) (ConsumerSpec, bool) {
	for _, c := range t.Consumers {
		if c.Stream == stream && c.Config.Durable == service {
			return c, true
		}
	}
	return ConsumerSpec{}, false
}

// phaseFilter is the LAVA_PHASES filter for one event of every resource.
func phaseFilter(event string) string { return PrefixPhase + "*.*." + event }

// Declare is THE declaration of Lava's JetStream topology (docs/architecture.md section 3). Everything that
// creates, reads or documents a stream, consumer or bucket starts here.
func Declare(opts TopologyOptions) Topology {
	o := opts.withDefaults()
	return Topology{
		Streams:   declareStreams(o),
		Consumers: declareConsumers(o),
		Access:    declareAccess(),
		KeyValues: declareKeyValues(o),
		ObjectStores: []jetstream.ObjectStoreConfig{{
			Bucket:      ObjectStoreArtifacts,
			Description: "Terraform JSON, plans and state bodies by BLAKE3 digest",
			Storage:     o.Storage,
			Replicas:    o.Replicas,
		}},
	}
}

// declareStreams is the streams of [Declare], with o's storage, replicas and duplicate window.
func declareStreams(o TopologyOptions) []jetstream.StreamConfig {
	stream := func(name, desc string, subjects []string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxMsgs:     -1,
			MaxBytes:    -1,
			MaxAge:      0,
			// -1 (unlimited), as the server reports them, so the declaration compares equal.
			MaxMsgsPerSubject: -1,
			MaxMsgSize:        -1,
			MaxConsumers:      -1,
			Storage:           o.Storage,
			Replicas:          o.Replicas,
			Duplicates:        o.DuplicateWindow,
		}
	}
	resources := stream(StreamResources, "ResourceObserved and DeletionRequested, per resource (watcher)",
		[]string{PrefixResource + ">"})
	resources.MaxMsgsPerSubject = ResourceHistoryPerSubject
	resources.AllowDirect = true

	phases := stream(StreamPhases, "Pipeline phase events, per resource (all services)", []string{PrefixPhase + ">"})
	phases.MaxMsgsPerSubject = PhaseHistoryPerSubject

	commands := stream(StreamCommands, "ReapplyRequested and RetryRequested, a work queue (viggy)",
		[]string{PrefixCommand + ">"})
	commands.Retention = jetstream.WorkQueuePolicy

	anomalies := stream(StreamAnomalies, "AnomalyDetected as protojson with a Lava-Schema header (anomaly; public)",
		[]string{PrefixAnomaly + ">"})
	anomalies.MaxAge = AnomalyMaxAge

	receipts := stream(StreamReceipts, "Per-resource receipt chains (attest); never discards", []string{PrefixReceipt + ">"})
	receipts.DenyDelete = true
	receipts.DenyPurge = true
	receipts.AllowDirect = true
	return []jetstream.StreamConfig{resources, phases, commands, anomalies, receipts}
}

// declareConsumers is the durable consumers of [Declare], one per reading service and stream,
// with o's back-off, delivery and ack-pending bounds.
func declareConsumers(o TopologyOptions) []ConsumerSpec {
	consumer := func(streamName, service string, filters ...string) ConsumerSpec {
		return ConsumerSpec{Stream: streamName, Config: jetstream.ConsumerConfig{
			Durable:        service,
			Name:           service,
			Description:    "lava " + service + " (shared by its replicas)",
			DeliverPolicy:  jetstream.DeliverAllPolicy,
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        o.BackOff[0],
			BackOff:        o.BackOff,
			MaxDeliver:     o.MaxDeliver,
			MaxAckPending:  o.MaxAckPending,
			FilterSubjects: filters,
		}}
	}
	// The anomaly service reads the anomalies other services publish directly. A new consumer
	// starts at the stream's end: the anomalies of the last 30 days were routed (or not) before
	// the service was installed, and must not page anyone now.
	anomalyReader := consumer(StreamAnomalies, ServiceAnomaly, PrefixAnomaly+">")
	anomalyReader.Config.DeliverPolicy = jetstream.DeliverNewPolicy
	// Who reads what follows the event catalogue of docs/events.md.
	return []ConsumerSpec{
		consumer(StreamResources, ServiceSynth, ResourceSubjectFilter(EventObserved)),
		consumer(StreamResources, ServiceApplier, ResourceSubjectFilter(EventDeletionRequested)),
		consumer(StreamResources, ServiceDrift, ResourceSubjectFilter(EventObserved)),
		consumer(StreamResources, ServiceViggy, ResourceSubjectFilter(EventObserved)),

		consumer(StreamPhases, ServiceWatcher, phaseFilter(EventSynthesized), phaseFilter(EventPlanned),
			phaseFilter(EventApplied), phaseFilter(EventFailed), phaseFilter(EventDestroyed),
			phaseFilter(EventDriftScanned), phaseFilter(EventTickReported), phaseFilter(EventReceiptAppended)),
		consumer(StreamPhases, ServiceApplier, phaseFilter(EventSynthesized)),
		consumer(StreamPhases, ServiceDrift, phaseFilter(EventApplied), phaseFilter(EventDestroyed), phaseFilter(EventPhaseChanged)),
		consumer(StreamPhases, ServiceViggy, phaseFilter(EventPlanned), phaseFilter(EventApplied), phaseFilter(EventFailed),
			phaseFilter(EventDriftScanned)),
		consumer(StreamPhases, ServiceAnomaly, phaseFilter(EventFailed), phaseFilter(EventDriftScanned),
			phaseFilter(EventPhaseChanged), phaseFilter(EventTickReported)),
		consumer(StreamPhases, ServiceAttest, phaseFilter(EventPhaseChanged), phaseFilter(EventTickReported)),

		// Work queue: the filters of its consumers must not overlap.
		consumer(StreamCommands, ServiceSynth, PrefixCommand+StageSynth+".>"),
		consumer(StreamCommands, ServiceApplier, PrefixCommand+StagePlan+".>", PrefixCommand+StageApply+".>",
			PrefixCommand+StageDestroy+".>"),

		anomalyReader,
		consumer(StreamAnomalies, ServiceAttest, PrefixAnomaly+">"),
	}
}

// declareKeyValues is the key-value buckets of [Declare], with o's storage, replicas, lease
// TTL and anomaly window.
func declareKeyValues(o TopologyOptions) []jetstream.KeyValueConfig {
	kv := func(bucket, desc string) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{Bucket: bucket, Description: desc, History: 1, Storage: o.Storage, Replicas: o.Replicas}
	}
	state := kv(BucketState, "Per-resource state serial, lineage, digest and lock")
	state.History = StateHistory
	leases := kv(BucketLeases, "Per-resource work leases")
	leases.TTL = o.LeaseTTL
	windows := kv(BucketAnomalyWindows, "Anomaly de-duplication windows, per fingerprint (anomaly)")
	windows.TTL = AnomalyWindowsTTL(o.AnomalyWindow)
	return []jetstream.KeyValueConfig{
		state,
		leases,
		kv(BucketWatermarks, "Newest generation seen, per service and resource"),
		kv(BucketDriftSchedule, "Per-resource drift scan schedule"),
		kv(BucketViggy, "viggy: per-resource policy, last decision, scheduled retries and escalations"),
		windows,
		kv(BucketAnomalyProgress, "Resources in a working phase and since when (anomaly)"),
	}
}

// PoisonAnomalySubject is the subject every service reports a terminated message on (the
// anomaly service's report.PoisonReporter): lava.anomaly.functional.poison_message.
var PoisonAnomalySubject = AnomalySubject("functional", "poison_message")

// ForeignReceiptAnomalySubject is the subject attest reports a foreign message on a receipt
// chain's subject on (internal/service/attest ForeignReporter):
// lava.anomaly.critical.foreign_receipt.
var ForeignReceiptAnomalySubject = AnomalySubject("critical", "foreign_receipt")

// StateRegressedAnomalySubject is the subject the applier reports a plan made against a lost
// or regressed state on (pipeline.StateRegressedAnomaly): lava.anomaly.critical.state_regressed.
// Without it in the applier's permissions the report is refused and the applier's handling of
// the object never ends (docs/design/0025-lost-or-regressed-state.md).
var StateRegressedAnomalySubject = AnomalySubject("critical", "state_regressed")

// declareAccess is who writes what and which buckets each service uses, following the
// "published by" column of docs/events.md's event catalogue and the services' packages
// (internal/service/*): the input of [Topology.Permissions] with the consumers.
func declareAccess() []Access {
	rw := func(b string) BucketUse { return BucketUse{Bucket: b, Write: true} }
	ro := func(b string) BucketUse { return BucketUse{Bucket: b} }
	return []Access{
		{
			Service: ServiceWatcher,
			Publish: []string{ResourceSubjectFilter(EventObserved), ResourceSubjectFilter(EventDeletionRequested),
				phaseFilter(EventPhaseChanged), PoisonAnomalySubject},
			ReadStreams: []string{StreamResources},
		},
		{
			Service:      ServiceSynth,
			Publish:      []string{phaseFilter(EventSynthesized), phaseFilter(EventFailed), PoisonAnomalySubject},
			ReadStreams:  []string{StreamResources},
			KeyValues:    []BucketUse{rw(BucketWatermarks)},
			ObjectStores: []BucketUse{rw(ObjectStoreArtifacts)},
		},
		{
			Service: ServiceApplier,
			Publish: []string{phaseFilter(EventPlanned), phaseFilter(EventApplied), phaseFilter(EventFailed),
				phaseFilter(EventDestroyed), PoisonAnomalySubject, StateRegressedAnomalySubject},
			ReadStreams:  []string{StreamResources, StreamPhases},
			KeyValues:    []BucketUse{rw(BucketState), rw(BucketLeases), rw(BucketWatermarks)},
			ObjectStores: []BucketUse{rw(ObjectStoreArtifacts)},
		},
		{
			// drift refreshes through the state store, which locks lava-state; it never writes
			// a state body, so lava-artifacts is read-only.
			Service:      ServiceDrift,
			Publish:      []string{phaseFilter(EventDriftScanned), PoisonAnomalySubject},
			KeyValues:    []BucketUse{rw(BucketState), rw(BucketLeases), rw(BucketDriftSchedule)},
			ObjectStores: []BucketUse{ro(ObjectStoreArtifacts)},
		},
		{
			Service: ServiceViggy,
			Publish: []string{phaseFilter(EventTickReported), phaseFilter(EventFailed), PrefixCommand + ">",
				PrefixAnomaly + ">"},
			KeyValues: []BucketUse{rw(BucketViggy)},
		},
		{
			Service:     ServiceAnomaly,
			Publish:     []string{PrefixAnomaly + ">"},
			ReadStreams: []string{StreamResources},
			KeyValues:   []BucketUse{rw(BucketAnomalyWindows), rw(BucketAnomalyProgress)},
		},
		{
			Service: ServiceAttest,
			Publish: []string{PrefixReceipt + ">", phaseFilter(EventReceiptAppended), PoisonAnomalySubject, ForeignReceiptAnomalySubject},
			// LAVA_PHASES by message: the earlier events of a resource, appended first (phase order).
			ReadStreams: []string{StreamReceipts, StreamPhases},
			ScanStreams: []string{StreamReceipts},
		},
	}
}

// ResourceSubjectFilter is the LAVA_RESOURCES filter for one event of every resource.
func ResourceSubjectFilter(event string) string { return PrefixResource + "*.*." + event }

// EnsureTopology creates every stream, consumer, KV bucket and object store of
// [Declare](opts), or updates it in place when its configuration changed. It is idempotent and
// safe to run from every replica at start-up. The key-value buckets' reads go to their stream
// leader (direct gets off; [leaderReads] says why). A change JetStream cannot make in place
// (retention, storage type) fails with the server's error, wrapped.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, opts TopologyOptions) error {
	t := Declare(opts)
	for _, cfg := range t.Streams {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("bus: ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, c := range t.Consumers {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config); err != nil {
			return fmt.Errorf("bus: ensure consumer %s on %s: %w", c.Config.Durable, c.Stream, err)
		}
	}
	for _, cfg := range t.KeyValues {
		_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another replica created the bucket between this one's look-up and its create,
			// and turned its direct gets off ([leaderReads]), so the configurations differ:
			// the bucket exists now, and a second call updates it.
			_, err = js.CreateOrUpdateKeyValue(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("bus: ensure kv bucket %s: %w", cfg.Bucket, err)
		}
		if err := leaderReads(ctx, js, kvStream(cfg.Bucket)); err != nil {
			return fmt.Errorf("bus: ensure kv bucket %s: %w", cfg.Bucket, err)
		}
	}
	for _, cfg := range t.ObjectStores {
		if _, err := js.CreateOrUpdateObjectStore(ctx, cfg); err != nil {
			return fmt.Errorf("bus: ensure object store %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// leaderReads turns direct gets off on the stream of a key-value bucket, which nats.go creates
// with them on. With direct gets, every replica of a replicated stream answers reads from what
// it has applied so far, so a read right after the reader's own write may return the value
// before it (a state lock just taken reads as not held; a live lease as gone); without them a
// read goes to the stream leader, which answers after every write it acknowledged. A client
// binds a bucket with the setting it has then (jetstream.KeyValue reads the stream's
// configuration once), so a service started before this ran keeps direct gets until it
// restarts.
func leaderReads(ctx context.Context, js jetstream.JetStream, stream string) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// defaultCleanupTimeout bounds best-effort cleanup done after the caller's context ended.
const defaultCleanupTimeout = 5 * time.Second

// ErrTopologyMissing reports that a stream, consumer or bucket a service needs does not exist:
// the bootstrap step (`lava nats bootstrap`, the chart's hook Job) has not run, or ran with
// other options.
var ErrTopologyMissing = errors.New("bus: topology missing (run `lava nats bootstrap` with the bootstrap identity)")

// CheckTopology checks, without creating anything, that what service uses exists on js: its
// durable consumers, the streams it reads and the buckets of its access entry (the services
// run without JetStream admin rights, so they cannot create them). The error wraps
// [ErrTopologyMissing] and names every missing piece ("consumer applier on LAVA_PHASES, kv
// bucket lava-state"); other failures (a refused or unanswered request) are returned as they
// are, wrapped.
func CheckTopology(ctx context.Context, js jetstream.JetStream, service string, opts TopologyOptions) error {
	t := Declare(opts)
	a, ok := t.AccessOf(service)
	if !ok {
		return fmt.Errorf("bus: unknown service %q", service)
	}
	var missing []string
	check := func(what string, err error, notFound ...error) error {
		for _, nf := range notFound {
			if errors.Is(err, nf) {
				missing = append(missing, what)
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("bus: check %s: %w", what, err)
		}
		return nil
	}
	for _, s := range a.ReadStreams {
		_, err := js.Stream(ctx, s)
		if err := check("stream "+s, err, jetstream.ErrStreamNotFound); err != nil {
			return err
		}
	}
	for _, c := range t.Consumers {
		if c.Config.Durable != service {
			continue
		}
		_, err := js.Consumer(ctx, c.Stream, c.Config.Durable)
		if err := check("consumer "+c.Config.Durable+" on "+c.Stream, err, jetstream.ErrConsumerNotFound, jetstream.ErrStreamNotFound); err != nil {
			return err
		}
	}
	for _, b := range a.KeyValues {
		_, err := js.KeyValue(ctx, b.Bucket)
		if err := check("kv bucket "+b.Bucket, err, jetstream.ErrBucketNotFound); err != nil {
			return err
		}
	}
	for _, b := range a.ObjectStores {
		_, err := js.ObjectStore(ctx, b.Bucket)
		if err := check("object store "+b.Bucket, err, jetstream.ErrBucketNotFound, jetstream.ErrStreamNotFound); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s needs %s", ErrTopologyMissing, service, strings.Join(missing, ", "))
	}
	return nil
}
