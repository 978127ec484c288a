package bus

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// IsSynthesized is a [ConsumeOptions].Coalesce: a resource's Synthesized phase subject, whose
// newest message is the render that matters.
func IsSynthesized(subject string) bool {
	s, err := ParseSubject(subject)
	return err == nil && s.Kind == KindPhase && s.Event == EventSynthesized
}

// IsObserved is a [ConsumeOptions].Coalesce: a resource's ResourceObserved subject, whose
// newest message is the object as it is now (an older generation is dropped by synth's
// watermark anyway).
func IsObserved(subject string) bool {
	s, err := ParseSubject(subject)
	return err == nil && s.Kind == KindResource && s.Event == EventObserved
}

// NamespaceKey is the [ConsumeOptions].FairKey that shares a service's handlers between
// namespaces: the namespace of a resource, phase, command or receipt subject; "" for a subject
// that names none (anomalies), which therefore share one key.
func NamespaceKey(subject string) string {
	s, err := ParseSubject(subject)
	if err != nil {
		return ""
	}
	return s.Namespace
}

// DefaultMaxPerKey is [ConsumeOptions].MaxPerKey when it is not set: half the handlers,
// rounded up, so that one key never holds every handler of a consumer that has two or more.
func DefaultMaxPerKey(concurrency int) int { return max(1, (concurrency+1)/2) }

// fairQueue holds the messages a fair consumer ([ConsumeOptions].FairKey) pulled and has not
// started, one FIFO per key, and hands them to workers: a worker takes the oldest message of
// the next key, in turn, that runs fewer than maxPerKey handlers. Messages of a key at its
// share wait while the other keys' messages run. At most backlog messages of at most
// backlogBytes in all wait; a put past either blocks (the pull callback, and so the client's
// pull, waits for a worker). A message larger than backlogBytes is let in when nothing waits.
type fairQueue struct {
	key          func(subject string) string
	coalesce     func(subject string) bool
	maxPerKey    int
	backlog      int
	backlogBytes int

	mu      sync.Mutex
	cond    *sync.Cond
	waiting map[string][]jetstream.Msg
	// turn is the keys with waiting messages, in the order they are served.
	turn    []string
	running map[string]int
	// n and bytes are the count and the size ([msgSize]) of the waiting messages.
	n      int
	bytes  int
	closed bool
}

func newFairQueue(key func(string) string, coalesce func(string) bool, maxPerKey, backlog, backlogBytes int) *fairQueue {
	q := &fairQueue{key: key, coalesce: coalesce, maxPerKey: maxPerKey, backlog: backlog, backlogBytes: backlogBytes,
		waiting: map[string][]jetstream.Msg{}, running: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put adds m to its key's FIFO, waiting while backlog messages wait already; false when ctx
// ended or the queue closed first (the caller naks m). When m's subject coalesces and a
// message of the same subject waits, the later of the two in the stream takes the waiting
// one's place and the other is returned as superseded (the caller acks it), with ok true.
func (q *fairQueue) put(ctx context.Context, m jetstream.Msg) (ok bool, superseded jetstream.Msg) {
	k := q.key(m.Subject())
	if q.coalesce != nil && q.coalesce(m.Subject()) {
		q.mu.Lock()
		for i, w := range q.waiting[k] {
			if w.Subject() != m.Subject() {
				continue
			}
			if streamSeq(w) > streamSeq(m) {
				m, w = w, m
			}
			q.waiting[k][i] = m
			q.bytes += msgSize(m) - msgSize(w)
			q.mu.Unlock()
			return true, w
		}
		q.mu.Unlock()
	}
	return q.add(ctx, k, m), nil
}

// streamSeq is m's sequence in its stream (0 when its metadata does not parse).
func streamSeq(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

// msgSize is what m holds in memory, near enough: its subject, headers and body.
func msgSize(m jetstream.Msg) int {
	n := len(m.Subject()) + len(m.Data())
	for k, vs := range m.Headers() {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// add appends m to key k's FIFO as [fairQueue.put] does.
func (q *fairQueue) add(ctx context.Context, k string, m jetstream.Msg) bool {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	size := msgSize(m)
	for (q.n >= q.backlog || q.n > 0 && q.bytes+size > q.backlogBytes) && !q.closed && ctx.Err() == nil {
		q.cond.Wait()
	}
	if q.closed || ctx.Err() != nil {
		return false
	}
	if len(q.waiting[k]) == 0 {
		q.turn = append(q.turn, k)
	}
	q.waiting[k] = append(q.waiting[k], m)
	q.n++
	q.bytes += size
	q.cond.Broadcast()
	return true
}

// take returns the next message to run and its key, waiting for one whose key is under its
// share; ok is false once the queue is closed.
func (q *fairQueue) take() (m jetstream.Msg, key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.closed {
			return nil, "", false
		}
		for i, k := range q.turn {
			if q.running[k] >= q.maxPerKey {
				continue
			}
			msgs := q.waiting[k]
			m, q.waiting[k] = msgs[0], msgs[1:]
			q.turn = append(q.turn[:i:i], q.turn[i+1:]...)
			if len(q.waiting[k]) == 0 {
				delete(q.waiting, k)
			} else {
				q.turn = append(q.turn, k) // the key's next message waits for its turn again
			}
			q.running[k]++
			q.n--
			q.bytes -= msgSize(m)
			q.cond.Broadcast()
			return m, k, true
		}
		q.cond.Wait()
	}
}

// done ends a run of key's.
func (q *fairQueue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running[key]--; q.running[key] <= 0 {
		delete(q.running, key)
	}
	q.cond.Broadcast()
}

// close stops the queue and returns the messages that were waiting, which no worker will
// start; workers return from take.
func (q *fairQueue) close() []jetstream.Msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	var left []jetstream.Msg
	for _, k := range q.turn {
		left = append(left, q.waiting[k]...)
	}
	q.waiting, q.turn, q.n, q.bytes = map[string][]jetstream.Msg{}, nil, 0, 0
	q.cond.Broadcast()
	return left
}
