package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
)

// Message is one delivery handed to a [Handler].
type Message struct {
	// Subject the event was published on; [ParseSubject] recovers the resource.
	Subject string
	// Header is the NATS header ([HeaderSchema], Nats-Msg-Id, ...).
	Header nats.Header
	// Data is the raw body (binary protobuf, or protojson on the anomaly subjects).
	Data []byte
	// Schema is the [HeaderSchema] value, the event's protobuf full name.
	Schema string
	// Event is the decoded body.
	Event Event
	// Envelope is Event's envelope (never nil).
	Envelope *lavav1.Envelope
	// Stream and Consumer the message came from.
	Stream, Consumer string
	// StreamSeq is the message's sequence in its stream.
	StreamSeq uint64
	// NumDelivered counts deliveries of this message to the consumer, from 1.
	NumDelivered uint64
	// NumPending is the consumer's lag as the server reported it with this delivery: the
	// stream's messages matching the consumer not yet delivered to it (metadata num_pending).
	NumPending uint64
	// Published is when the stream stored the message.
	Published time.Time
}

// Handler handles one message. Returning nil acks it; a [Permanent] error terminates it
// (poison); any other error naks it for redelivery with exponential delay, until the
// consumer's MaxDeliver, where it is terminated as poison. ctx ends at the message's deadline
// (ConsumeOptions.HandlerTimeout) or when a graceful drain times out; a handler that has not
// returned HandlerGrace after that is abandoned ([PoisonHandlerTimeout]). Handlers must be
// idempotent: a message can be delivered again.
type Handler func(ctx context.Context, m *Message) error

// PoisonReason says why a message was terminated.
type PoisonReason string

// Poison reasons; also the TermWithReason text (prefixed "lava: ").
const (
	PoisonPermanent     PoisonReason = "permanent"
	PoisonUndecodable   PoisonReason = "undecodable"
	PoisonMaxDeliveries PoisonReason = "max_deliveries"
	// PoisonSubjectMismatch: the envelope's resource (namespace, name) is not the one the
	// subject names. Permissions are per subject (docs/security.md, "Bus"), so a body that
	// names another resource is never trusted: the handler does not run.
	PoisonSubjectMismatch PoisonReason = "subject_mismatch"
	// PoisonHandlerTimeout: the handler ran past its deadline (ConsumeOptions.HandlerTimeout)
	// and then past HandlerGrace without returning: it ignores its context (wedged). Its run
	// is abandoned, and the message is terminated at once rather than given to another worker
	// to wedge too.
	PoisonHandlerTimeout PoisonReason = "handler_timeout"
)

// ErrSubjectMismatch is the error of a [PoisonSubjectMismatch] report.
var ErrSubjectMismatch = errors.New("bus: the payload's resource is not the subject's")

// PoisonReport describes a terminated message, for the anomaly service.
type PoisonReport struct {
	// Stream, Consumer and Subject locate the message.
	Stream, Consumer, Subject string
	// StreamSeq is its sequence in the stream.
	StreamSeq uint64
	// NumDelivered is how many times it was delivered.
	NumDelivered uint64
	// Reason says why it was terminated.
	Reason PoisonReason
	// Err is the handler's or the decoder's error. It may carry input details: sanitize
	// before it leaves the process.
	Err error
	// Schema is the Lava-Schema header ("" if absent).
	Schema string
	// Envelope is the decoded envelope, nil when the body was undecodable.
	Envelope *lavav1.Envelope
}

// Backoff is Lava's one retry schedule (the bus's redelivery delays, viggy's stage retries):
// the n-th delay is Base * 2^(n-1), capped at Max, scaled by a uniform factor in
// [1-Jitter, 1+Jitter] and never above Max. Jitter is in [0, 1); 0 is no jitter.
type Backoff struct {
	Base, Max time.Duration
	Jitter    float64
}

// Delay is the delay after the n-th failure or delivery (n counts from 1; n < 1 is 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 - b.Jitter + 2*b.Jitter*rand.Float64()))
	}
	return min(d, b.Max)
}

// Pull request settings: a pull request lives pullExpiry; the server sends an idle heartbeat
// every pullHeartbeat, and two missed heartbeats (a restarted or failed-over server) make the
// client pull again, so a consumer resumes within about 2s of the server coming back.
const (
	pullExpiry    = 10 * time.Second
	pullHeartbeat = time.Second
)

// ConsumeOptions configures [Consume]. Stream and Consumer are required.
type ConsumeOptions struct {
	// Stream and Consumer name the durable pull consumer (the consumer is the service name;
	// see [Declare]). It must exist ([EnsureTopology]).
	Stream, Consumer string
	// Concurrency bounds handlers running at once in this process (and messages buffered
	// client-side). Default 8.
	Concurrency int
	// NakBackoff is the redelivery delay after a transient error. Default 1s doubling to 1m;
	// a zero Jitter is 0.2 (±20%).
	NakBackoff Backoff
	// DrainTimeout is how long in-flight handlers may run after ctx is cancelled before their
	// context is cancelled too. Default 30s.
	DrainTimeout time.Duration
	// HandlerTimeout is the deadline of one handler run, from its start (the handler's
	// context, derived from Consume's). A handler that returns after it fails like any
	// transient error. Default 1h (longer than the engines' own step timeouts: OpenTofu's
	// apply is bounded at 30m).
	HandlerTimeout time.Duration
	// HandlerGrace is how long Consume still waits for a handler whose context ended (its
	// deadline passed, or a drain timed out). After it the run is abandoned: it goes on in the
	// background with its result dropped, and its worker takes the next message, so one
	// handler that ignores its context never holds a worker, or shutdown, for good. A message
	// abandoned at its deadline is terminated and reported ([PoisonHandlerTimeout]); one
	// abandoned by a drain is naked for another replica. Default 30s.
	HandlerGrace time.Duration
	// HeartbeatInterval is how often a running handler's message, and the message waiting for
	// a free worker, gets an InProgress (resets the server's ack wait). Default a third of the
	// consumer's AckWait. Up to Concurrency more messages can wait in the client's pull buffer
	// without heartbeats.
	HeartbeatInterval time.Duration
	// OnPoison, if set, is called once per terminated message, after Term, and once per
	// message whose last allowed delivery expired without an ack (a crashed or hung replica;
	// the server's max-deliveries advisory, received by one replica).
	OnPoison func(ctx context.Context, r PoisonReport)
	// Types resolves Lava-Schema names. Default protoregistry.GlobalTypes (every generated
	// lavav1 message registers itself there).
	Types protoregistry.MessageTypeResolver
	// Logger receives per-message Debug logs and Warn logs for nak, term and ack failures.
	// Default: discard.
	Logger *slog.Logger
	// Metrics, if set, counts outcomes.
	Metrics *Metrics
	// OrderKey, if set, keeps the messages of one key in stream order in this process: it
	// maps a message's subject to a key ([ResourceOrderKey]: the resource), and every message
	// of a key is handled by the same worker, one after the other, in the order the server
	// delivered them. Messages of different keys still run concurrently (Concurrency workers).
	// A message that fails and is redelivered later can still come after a later message of
	// its key. Nil: any worker takes any message.
	OrderKey func(subject string) string
	// FairKey, if set, shares the handlers between keys: it maps a message's subject to a key
	// ([NamespaceKey]: the namespace), at most MaxPerKey handlers of one key run at once, and
	// a free worker takes the oldest waiting message of the next key in turn, so one key's
	// long handlers (a tenant's slow provider calls) never hold every worker while other keys'
	// messages wait. Pulled messages wait in this process, with heartbeats, instead of in the
	// pull (up to Backlog messages and BacklogBytes). Not with OrderKey. Nil: any worker takes
	// the next message.
	FairKey func(subject string) string
	// Coalesce, with FairKey, names the subjects whose newest message supersedes an older one
	// waiting for a worker (a resource's Synthesized: only its newest render matters): the
	// message later in the stream takes the waiting one's place, and the other is acked
	// without running the handler (result "superseded"), so a flood of one resource's
	// events holds one place in the backlog. Nil: none.
	Coalesce func(subject string) bool
	// MaxPerKey is how many handlers one FairKey key may run at once, at most Concurrency.
	// Default [DefaultMaxPerKey] of Concurrency.
	MaxPerKey int
	// Backlog is how many pulled messages may wait for a worker with FairKey; past it the pull
	// waits, and what the server has not delivered waits there in stream order. Default (and
	// at most) the consumer's MaxAckPending (TopologyOptions.MaxAckPending, 1000): the server
	// then stops delivering before the backlog is full, so the pull never waits on a count and
	// every delivered message gets its heartbeats.
	Backlog int
	// BacklogBytes bounds the bytes of the messages waiting with FairKey (their subjects,
	// headers and bodies); past it the pull waits. A single message larger than it is let in
	// when nothing else waits. Default [DefaultBacklogBytes].
	BacklogBytes int
	// AckSync makes each ack wait for the server's confirmation (up to 2s) before the worker
	// takes the next message. By default acks are sent without waiting (and flushed before
	// Consume returns): faster, and a lost ack only means a redelivery the idempotent handler
	// absorbs. While the connection is down a synchronous ack blocks its worker until the
	// timeout.
	AckSync bool
}

// DefaultHandlerTimeout is [ConsumeOptions].HandlerTimeout when it is not set: one hour.
const DefaultHandlerTimeout = time.Hour

// DefaultBacklogBytes is [ConsumeOptions].BacklogBytes when it is not set: 64 MiB, 64
// messages of the bus' 1 MiB payload limit, or a full backlog of events that carry references
// (bodies are in the object store).
const DefaultBacklogBytes = 64 << 20

// ackSyncTimeout bounds a synchronous ack.
const ackSyncTimeout = 2 * time.Second

func (o ConsumeOptions) withDefaults(info *jetstream.ConsumerInfo) ConsumeOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.NakBackoff.Base <= 0 {
		o.NakBackoff.Base = time.Second
	}
	if o.NakBackoff.Max < o.NakBackoff.Base {
		o.NakBackoff.Max = max(time.Minute, o.NakBackoff.Base)
	}
	if o.NakBackoff.Jitter <= 0 {
		o.NakBackoff.Jitter = 0.2
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.HandlerTimeout <= 0 {
		o.HandlerTimeout = DefaultHandlerTimeout
	}
	if o.HandlerGrace <= 0 {
		o.HandlerGrace = 30 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = max(info.Config.AckWait/3, 10*time.Millisecond)
	}
	if o.FairKey != nil {
		if o.MaxPerKey <= 0 {
			o.MaxPerKey = DefaultMaxPerKey(o.Concurrency)
		}
		o.MaxPerKey = min(o.MaxPerKey, o.Concurrency)
	}
	if o.FairKey != nil {
		if pending := info.Config.MaxAckPending; pending > 0 && (o.Backlog <= 0 || o.Backlog > pending) {
			o.Backlog = pending
		}
		if o.Backlog <= 0 {
			o.Backlog = defaultMaxAckPending
		}
		if o.BacklogBytes <= 0 {
			o.BacklogBytes = DefaultBacklogBytes
		}
	}
	if o.Types == nil {
		o.Types = protoregistry.GlobalTypes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Consume runs the handler on the durable pull consumer opts.Consumer of opts.Stream until ctx
// is cancelled, then drains: it stops pulling, naks buffered messages that were not started so
// another replica takes them at once, lets running handlers finish (up to DrainTimeout, then
// cancels their context and naks what did not succeed), and returns nil. Every replica of a
// service runs Consume on the same durable; JetStream spreads the messages between them.
//
// A message in transit at shutdown is not naked: the server answers a pull request that is
// still open when the drain unsubscribes (it checks the request's interest, then sends
// asynchronously), and a message sent that way after the unsubscribe reaches no one. The
// server redelivers it after the consumer's ack wait (TopologyOptions.BackOff[0], 30s by
// default), to any replica. Nothing is lost; that message is only late.
//
// At most Concurrency handlers run at once, on a fixed pool of goroutines, each run in a
// goroutine its worker waits for; a run abandoned past its deadline (HandlerGrace) is the only
// one that outlives its worker's wait. A message is acked only after its handler returned nil. Consume returns an error if the consumer cannot be
// found, the pull subscription fails to start, or it ends before ctx (the consumer was deleted
// or the connection closed).
func Consume(ctx context.Context, js jetstream.JetStream, opts ConsumeOptions, h Handler) error {
	if opts.FairKey != nil && opts.OrderKey != nil {
		return errors.New("bus: ConsumeOptions.FairKey with OrderKey")
	}
	cons, err := js.Consumer(ctx, opts.Stream, opts.Consumer)
	if err != nil {
		return fmt.Errorf("bus: consumer %s on %s: %w", opts.Consumer, opts.Stream, err)
	}
	info := cons.CachedInfo()
	o := opts.withDefaults(info)
	c := &consumer{opts: o, handler: h, maxDeliver: info.Config.MaxDeliver, inflight: map[jetstream.Msg]struct{}{}}

	// Handler context: survives ctx for DrainTimeout so in-flight work can finish.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	p := c.startWorkers(hctx)
	if o.OnPoison != nil {
		sub, err := c.watchMaxDeliveries(ctx, js)
		if err != nil {
			p.abort()
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	cc, err := c.pull(ctx, js, cons, p)
	if err != nil {
		p.abort()
		return fmt.Errorf("bus: pull from %s on %s: %w", opts.Consumer, opts.Stream, err)
	}
	endPull(ctx, cc, o.DrainTimeout)
	p.drain(hcancel)
	// Send the acks of the last handlers before the caller closes the connection.
	_ = js.Conn().FlushTimeout(ackSyncTimeout)
	if ctx.Err() == nil {
		if err := c.missing(ctx, js); err != nil {
			return err
		}
		return fmt.Errorf("bus: consumer %s on %s stopped by the server or connection", opts.Consumer, opts.Stream)
	}
	return nil
}

// missing reports, as an error wrapping [ErrTopologyMissing] that names them, that c's
// consumer or its stream no longer exists (deleted, or the server's store was lost), nil when
// both exist or the server could not tell.
func (c *consumer) missing(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, consumerCheckTimeout)
	defer cancel()
	_, err := js.Consumer(ctx, c.opts.Stream, c.opts.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: consumer %s on %s: %w", ErrTopologyMissing, c.opts.Consumer, c.opts.Stream, err)
	}
	return nil
}

// consumerCheckTimeout bounds one check of whether a consumer still exists.
const consumerCheckTimeout = 5 * time.Second

// missingChecksBeforeStop is how many lookups in a row must find the consumer missing before
// a pull that keeps failing is stopped: a server that restarts or fails over answers
// "no responders" for a moment, never that the consumer is gone, but one check is not enough
// to end a service over.
const missingChecksBeforeStop = 2

// workerPool is Consume's fixed pool of workers, the queues they read, and the goroutine
// sending the heartbeats of the messages they hold ([consumer.heartbeat]).
type workerPool struct {
	c *consumer
	// queues has one queue per worker with OrderKey; without it every worker reads queue 0.
	// With FairKey there are none: fair holds the waiting messages.
	queues  []chan jetstream.Msg
	fair    *fairQueue
	workers sync.WaitGroup
	// gate is held (read) by the pull callback while it hands a message to a worker, and
	// (write) while the queues are closed; closed is set then.
	gate   sync.RWMutex
	closed bool
	hbDone chan struct{}
	hb     sync.WaitGroup
}

// startWorkers starts c's Concurrency workers, each running the handler ([consumer.handle])
// under hctx on the messages of its queue, and the heartbeat. The pool is stopped with
// [workerPool.abort] when pulling did not start, else with [workerPool.drain].
func (c *consumer) startWorkers(hctx context.Context) *workerPool {
	o := c.opts
	p := &workerPool{c: c, queues: make([]chan jetstream.Msg, 1), hbDone: make(chan struct{})}
	if o.FairKey != nil {
		p.queues, p.fair = nil, newFairQueue(o.FairKey, o.Coalesce, o.MaxPerKey, o.Backlog, o.BacklogBytes)
		for range o.Concurrency {
			p.workers.Go(func() {
				for {
					m, key, ok := p.fair.take()
					if !ok {
						return
					}
					c.handle(hctx, m)
					p.fair.done(key)
				}
			})
		}
		p.hb.Go(func() { c.heartbeat(p.hbDone) })
		return p
	}
	if o.OrderKey != nil {
		p.queues = make([]chan jetstream.Msg, o.Concurrency)
	}
	for i := range p.queues {
		p.queues[i] = make(chan jetstream.Msg)
	}
	for i := range o.Concurrency {
		q := p.queues[i%len(p.queues)]
		p.workers.Go(func() {
			for m := range q {
				c.handle(hctx, m)
			}
		})
	}
	p.hb.Go(func() { c.heartbeat(p.hbDone) })
	return p
}

// queueOf returns the queue of m's worker: the one m's OrderKey hashes to, or the only one.
func (p *workerPool) queueOf(m jetstream.Msg) chan jetstream.Msg {
	if len(p.queues) == 1 {
		return p.queues[0]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(p.c.opts.OrderKey(m.Subject())))
	return p.queues[h.Sum32()%uint32(len(p.queues))]
}

// closeQueues closes every queue: each worker returns after the messages it holds. The
// messages a fair queue held and no worker started are naked for another replica.
func (p *workerPool) closeQueues() {
	if p.fair != nil {
		for _, m := range p.fair.close() {
			p.c.untrack(m)
			p.c.drainNak(m)
		}
	}
	for _, q := range p.queues {
		close(q)
	}
}

// stopHeartbeat stops the heartbeat and waits for it.
func (p *workerPool) stopHeartbeat() {
	close(p.hbDone)
	p.hb.Wait()
}

// abort stops a pool no message was handed to: it closes the queues and waits for the
// workers and the heartbeat.
func (p *workerPool) abort() {
	p.closeQueues()
	p.workers.Wait()
	p.stopHeartbeat()
}

// dispatch is the pull callback: it hands m to its worker, blocking while that worker is
// busy, and naks it ([consumer.drainNak]) instead once ctx is cancelled or the queues are
// closed.
func (p *workerPool) dispatch(ctx context.Context, m jetstream.Msg) {
	c := p.c
	p.gate.RLock()
	defer p.gate.RUnlock()
	if p.closed || ctx.Err() != nil {
		c.drainNak(m)
		return
	}
	// Heartbeats start now: waiting for a worker counts against the ack wait too.
	c.track(m)
	if p.fair != nil {
		ok, superseded := p.fair.put(ctx, m)
		switch {
		case !ok:
			c.untrack(m)
			c.drainNak(m)
		case superseded != nil:
			c.untrack(superseded)
			c.supersededAck(superseded)
		}
		return
	}
	select {
	case p.queueOf(m) <- m:
	case <-ctx.Done():
		c.untrack(m)
		c.drainNak(m)
	}
}

// drain stops the pool once pulling ended: it closes the queues (the pull callback naks what
// it still receives), waits for the workers to finish, cancelling their handlers' context with
// cancel when that takes longer than DrainTimeout, then stops the heartbeat.
func (p *workerPool) drain(cancel context.CancelFunc) {
	p.gate.Lock()
	p.closed = true
	p.closeQueues()
	p.gate.Unlock()

	drained := make(chan struct{})
	go func() { p.workers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(p.c.opts.DrainTimeout):
		cancel()
		<-drained
	}
	p.stopHeartbeat()
}

// pull starts pulling cons's messages into the pool p ([workerPool.dispatch]) and returns the
// running pull; its errors are logged until ctx is cancelled. The error is the pull's failing
// to start.
//
// nats.go keeps pulling when the consumer is gone without its deletion being announced (the
// server's store was lost, or it was deleted while the connection was down): every pull then
// fails with "no heartbeat" or "no responders". On such a failure the consumer is looked up
// (one lookup at a time); when [missingChecksBeforeStop] lookups in a row find it or its
// stream missing, the pull is stopped, so [Consume] returns an error naming what is missing
// instead of the service logging the same failure forever while it looks healthy.
func (c *consumer) pull(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, p *workerPool) (jetstream.ConsumeContext, error) {
	o := c.opts
	var (
		mu       sync.Mutex
		cc       jetstream.ConsumeContext
		checking bool
		notFound int
	)
	check := func() {
		err := c.missing(ctx, js)
		mu.Lock()
		defer mu.Unlock()
		checking = false
		if err == nil {
			notFound = 0
			return
		}
		if notFound++; notFound >= missingChecksBeforeStop && cc != nil {
			o.Logger.Error("bus: pull stopped", "stream", o.Stream, "consumer", o.Consumer, "error", err)
			cc.Stop()
		}
	}
	// The callback runs on one goroutine and blocks while every worker is busy; the client
	// then holds at most Concurrency pulled messages (PullMaxMessages), queued without loss.
	consume, err := cons.Consume(func(m jetstream.Msg) { p.dispatch(ctx, m) },
		jetstream.PullMaxMessages(o.Concurrency), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() != nil {
				return
			}
			o.Logger.Warn("bus: pull", "stream", o.Stream, "consumer", o.Consumer, "error", err)
			if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !checking {
				checking = true
				go check()
			}
		}))
	mu.Lock()
	cc = consume
	mu.Unlock()
	return consume, err
}

// endPull waits for the pull cc to end: by itself (the consumer was deleted or the connection
// closed) or, once ctx is cancelled, by a drain, which it stops when it takes longer than
// timeout.
func endPull(ctx context.Context, cc jetstream.ConsumeContext, timeout time.Duration) {
	select {
	case <-ctx.Done():
		// Stop pulling; messages already received reach the callback, which naks them. One
		// the server sends for a pull still open after the unsubscribe is redelivered after
		// the ack wait (see Consume's doc comment).
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-time.After(timeout):
			cc.Stop()
		}
	case <-cc.Closed():
	}
}

type consumer struct {
	opts       ConsumeOptions
	handler    Handler
	maxDeliver int

	mu       sync.Mutex
	inflight map[jetstream.Msg]struct{}
}

// track adds m to the messages that get InProgress heartbeats; untrack removes it.
func (c *consumer) track(m jetstream.Msg) {
	c.mu.Lock()
	c.inflight[m] = struct{}{}
	c.mu.Unlock()
}

func (c *consumer) untrack(m jetstream.Msg) {
	c.mu.Lock()
	delete(c.inflight, m)
	c.mu.Unlock()
}

// heartbeat sends InProgress for every running handler's message (and the one waiting for a
// worker) each HeartbeatInterval.
func (c *consumer) heartbeat(done <-chan struct{}) {
	t := time.NewTicker(c.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			c.mu.Lock()
			msgs := make([]jetstream.Msg, 0, len(c.inflight))
			for m := range c.inflight {
				msgs = append(msgs, m)
			}
			c.mu.Unlock()
			for _, m := range msgs {
				if err := m.InProgress(); err != nil {
					c.opts.Logger.Warn("bus: in-progress", "stream", c.opts.Stream, "consumer", c.opts.Consumer, "error", err)
				}
			}
		}
	}
}

// supersededAck acks m, which a later message of its subject replaced before a worker took it
// ([ConsumeOptions].Coalesce).
func (c *consumer) supersededAck(m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		c.opts.Logger.Warn("bus: ack of a superseded message", "stream", c.opts.Stream, "consumer", c.opts.Consumer, "error", err)
		return
	}
	c.opts.Metrics.message(c.opts.Stream, c.opts.Consumer, ResultSuperseded)
}

func (c *consumer) drainNak(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		c.opts.Logger.Warn("bus: nak on drain", "stream", c.opts.Stream, "consumer", c.opts.Consumer, "error", err)
	}
	c.opts.Metrics.message(c.opts.Stream, c.opts.Consumer, ResultDrained)
}

// decode builds the Message for a delivery.
func (c *consumer) decode(m jetstream.Msg) (*Message, error) {
	msg := &Message{Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Stream: c.opts.Stream, Consumer: c.opts.Consumer}
	if md, err := m.Metadata(); err == nil {
		msg.StreamSeq, msg.NumDelivered, msg.NumPending, msg.Published = md.Sequence.Stream, md.NumDelivered, md.NumPending, md.Timestamp
		c.opts.Metrics.lag(c.opts.Stream, c.opts.Consumer, md.NumPending)
	}
	return msg, c.decodeBody(msg)
}

// decodeBody fills msg.Schema, msg.Event and msg.Envelope from its header and data.
func (c *consumer) decodeBody(msg *Message) error { return DecodeBody(c.opts.Types, msg) }

// DecodeBody fills msg.Schema, msg.Event and msg.Envelope from msg.Header and msg.Data, the
// one decoding of every Lava event (the consume loop's, and `lava events`'): the message type
// is the [HeaderSchema] header resolved in types (nil: protoregistry.GlobalTypes); the body is
// protojson on the anomaly subjects (or with [ContentTypeJSON]), binary protobuf elsewhere.
// Errors: no schema header, an unknown schema, an undecodable body, a type without envelope or
// an envelope without event_id.
func DecodeBody(types protoregistry.MessageTypeResolver, msg *Message) error {
	if types == nil {
		types = protoregistry.GlobalTypes
	}
	msg.Schema = msg.Header.Get(HeaderSchema)
	if msg.Schema == "" {
		return errors.New("bus: no Lava-Schema header")
	}
	mt, err := types.FindMessageByName(protoreflect.FullName(msg.Schema))
	if err != nil {
		return fmt.Errorf("bus: schema %q: %w", msg.Schema, err)
	}
	pm := mt.New().Interface()
	if msg.Header.Get(HeaderContentType) == ContentTypeJSON || strings.HasPrefix(msg.Subject, PrefixAnomaly) {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(msg.Data, pm)
	} else {
		err = proto.Unmarshal(msg.Data, pm)
	}
	if err != nil {
		return fmt.Errorf("bus: decode %s: %w", msg.Schema, err)
	}
	ev, ok := pm.(Event)
	if !ok {
		return fmt.Errorf("bus: %s has no envelope", msg.Schema)
	}
	msg.Event = ev
	msg.Envelope = ev.GetEnvelope()
	if msg.Envelope.GetEventId() == "" {
		return fmt.Errorf("bus: %s without envelope.event_id", msg.Schema)
	}
	return nil
}

// checkSubject fails with [ErrSubjectMismatch] when msg's subject names a resource (resource,
// phase and command subjects) other than its envelope's.
func checkSubject(msg *Message) error {
	if strings.HasPrefix(msg.Subject, PrefixAnomaly) {
		return nil
	}
	s, err := ParseSubject(msg.Subject)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSubjectMismatch, err)
	}
	res := msg.Envelope.GetResource()
	if s.Namespace != res.GetNamespace() || s.Name != res.GetName() {
		return fmt.Errorf("%w: subject %s names %s/%s, the envelope %s/%s", ErrSubjectMismatch, msg.Subject,
			s.Namespace, s.Name, res.GetNamespace(), res.GetName())
	}
	return nil
}

// advisoryMaxDeliveries prefixes the server's advisory subject for a message that reached
// MaxDeliver without an ack: "<prefix>.<stream>.<consumer>".
const advisoryMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"

// maxDeliveriesAdvisory is the part of the server's advisory Lava reads.
type maxDeliveriesAdvisory struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchMaxDeliveries reports messages whose last allowed delivery expired without an ack (a
// replica crashed or hung on it), which Consume could not terminate itself. One replica of
// the service receives each advisory (a queue group named after the consumer).
func (c *consumer) watchMaxDeliveries(ctx context.Context, js jetstream.JetStream) (*nats.Subscription, error) {
	o := c.opts
	stream, err := js.Stream(ctx, o.Stream)
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", o.Stream, err)
	}
	subject := advisoryMaxDeliveries + "." + o.Stream + "." + o.Consumer
	return js.Conn().QueueSubscribe(subject, "lava-poison-"+o.Consumer, func(am *nats.Msg) {
		var adv maxDeliveriesAdvisory
		if err := json.Unmarshal(am.Data, &adv); err != nil {
			o.Logger.Warn("bus: max deliveries advisory", "stream", o.Stream, "consumer", o.Consumer, "error", err)
			return
		}
		msg := &Message{Stream: o.Stream, Consumer: o.Consumer, StreamSeq: adv.StreamSeq, NumDelivered: adv.Deliveries}
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackSyncTimeout)
		raw, err := stream.GetMsg(gctx, adv.StreamSeq)
		cancel()
		if err == nil {
			msg.Subject, msg.Header, msg.Data, msg.Published = raw.Subject, raw.Header, raw.Data, raw.Time
			_ = c.decodeBody(msg) // best effort: the report carries what could be decoded
		}
		o.Metrics.message(o.Stream, o.Consumer, ResultMaxDeliveriesExpired)
		o.Logger.Warn("bus: message reached max deliveries without an ack", "stream", o.Stream, "consumer", o.Consumer,
			"subject", msg.Subject, "stream_seq", adv.StreamSeq)
		o.OnPoison(ctx, PoisonReport{
			Stream: o.Stream, Consumer: o.Consumer, Subject: msg.Subject, StreamSeq: adv.StreamSeq,
			NumDelivered: adv.Deliveries, Reason: PoisonMaxDeliveries,
			Err:    errors.New("bus: delivery limit reached without an ack (a handler crashed or hung)"),
			Schema: msg.Schema, Envelope: msg.Envelope,
		})
	})
}

// handle runs the handler on one message and settles it.
func (c *consumer) handle(ctx context.Context, m jetstream.Msg) {
	o := c.opts
	defer c.untrack(m)
	msg, err := c.decode(m)
	// Built only when something is logged: this is the per-message hot path.
	log := func() *slog.Logger {
		l := o.Logger.With("stream", o.Stream, "consumer", o.Consumer, "subject", msg.Subject, "stream_seq", msg.StreamSeq)
		if id := msg.Envelope.GetEventId(); id != "" {
			l = l.With("event_id", id)
		}
		return l
	}
	if err != nil {
		c.term(ctx, m, msg, PoisonUndecodable, err, log())
		return
	}
	if err := checkSubject(msg); err != nil {
		c.term(ctx, m, msg, PoisonSubjectMismatch, err, log())
		return
	}

	start := time.Now()
	abandoned, err := c.run(ctx, msg)
	o.Metrics.handled(o.Stream, o.Consumer, time.Since(start).Seconds())
	c.untrack(m)

	switch {
	case abandoned && ctx.Err() != nil:
		// A drain timed out and the handler ignored it: another replica takes the message.
		log().Warn("bus: handler abandoned at shutdown", "delivery", msg.NumDelivered, "error", err)
		c.drainNak(m)
	case abandoned:
		c.term(ctx, m, msg, PoisonHandlerTimeout, err, log())
	case err == nil:
		var aerr error
		if o.AckSync {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackSyncTimeout)
			aerr = m.DoubleAck(actx)
			cancel()
		} else {
			aerr = m.Ack()
		}
		if aerr != nil {
			// The message will be redelivered; the handler is idempotent.
			log().Warn("bus: ack", "error", aerr)
			return
		}
		o.Metrics.message(o.Stream, o.Consumer, ResultAck)
		if o.Logger.Enabled(ctx, slog.LevelDebug) {
			log().Debug("bus: acked")
		}
	case IsPermanent(err):
		c.term(ctx, m, msg, PoisonPermanent, err, log())
	case ctx.Err() != nil:
		// Drain timed out: hand the message to another replica now.
		c.drainNak(m)
	case c.maxDeliver > 0 && msg.NumDelivered >= uint64(c.maxDeliver):
		c.term(ctx, m, msg, PoisonMaxDeliveries, err, log())
	default:
		d := o.NakBackoff.Delay(int(msg.NumDelivered))
		if nerr := m.NakWithDelay(d); nerr != nil {
			log().Warn("bus: nak", "error", nerr)
		}
		o.Metrics.message(o.Stream, o.Consumer, ResultNak)
		log().Info("bus: handler failed, redelivering", "delivery", msg.NumDelivered, "delay", d, "error", err)
	}
}

// run calls the handler with the message's deadline (HandlerTimeout) and waits for it, up to
// HandlerGrace after its context ended; abandoned reports a run it stopped waiting for (the
// error then says so).
func (c *consumer) run(ctx context.Context, msg *Message) (abandoned bool, err error) {
	hctx, cancel := CancelAfter(ctx, c.opts.HandlerTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.call(hctx, msg) }()
	select {
	case err := <-done:
		return false, err
	case <-hctx.Done():
	}
	grace := time.NewTimer(c.opts.HandlerGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return false, err
	case <-grace.C:
		return true, fmt.Errorf("bus: the handler did not return within %v of its context's end (%w); abandoned", c.opts.HandlerGrace, context.Cause(hctx))
	}
}

// call calls the handler, turning a panic into a transient error.
func (c *consumer) call(ctx context.Context, msg *Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bus: handler panic: %v", r)
		}
	}()
	return c.handler(ctx, msg)
}

func (c *consumer) term(ctx context.Context, m jetstream.Msg, msg *Message, reason PoisonReason, err error, log *slog.Logger) {
	o := c.opts
	if terr := m.TermWithReason("lava: " + string(reason)); terr != nil {
		log.Warn("bus: term", "error", terr)
	}
	result := map[PoisonReason]string{
		PoisonPermanent: ResultTermPermanent, PoisonUndecodable: ResultTermUndecodable, PoisonMaxDeliveries: ResultTermMaxDeliveries,
		PoisonSubjectMismatch: ResultTermSubjectMismatch, PoisonHandlerTimeout: ResultTermHandlerTimeout,
	}[reason]
	o.Metrics.message(o.Stream, o.Consumer, result)
	log.Warn("bus: poison message terminated", "reason", string(reason), "delivery", msg.NumDelivered, "error", err)
	if o.OnPoison != nil {
		o.OnPoison(ctx, PoisonReport{
			Stream: o.Stream, Consumer: o.Consumer, Subject: msg.Subject, StreamSeq: msg.StreamSeq,
			NumDelivered: msg.NumDelivered, Reason: reason, Err: err, Schema: msg.Schema, Envelope: msg.Envelope,
		})
	}
}
