package attest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/readmodel"
)

// Errors of the store.
var (
	// ErrInvalidRequest reports an append without a resource, event id or matching payload.
	ErrInvalidRequest = errors.New("attest: invalid append request")
	// ErrConflict reports an append that lost the race for the chain's tail MaxAttempts times.
	ErrConflict = errors.New("attest: chain tail kept moving")
)

// ReceiptID is the Nats-Msg-Id of the receipt of an event: an [eventid.ID] of type
// "lava.v1.Receipt" with trigger "cause:<event_id>", so every attest replica derives the same
// id for the same event and JetStream stores it once within the stream's duplicate window.
func ReceiptID(uid string, generation int64, eventID string) string {
	return eventid.ID(uid, generation, readmodel.ReceiptSchema, eventid.CauseTrigger(eventID))
}

// StoreOptions configures a [Store]. The zero value is valid.
type StoreOptions struct {
	// Signer signs receipts; nil appends unsigned receipts (algo "none").
	Signer *readmodel.Signer
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics, if set, counts appends, conflicts and duplicates.
	Metrics *Metrics
	// MaxClockSkew bounds the difference between the store times of LAVA_PHASES or
	// LAVA_ANOMALIES and LAVA_RECEIPTS (different stream leaders in a cluster). The duplicate
	// search goes back to AppendRequest.NotBefore minus this. Default 1m.
	MaxClockSkew time.Duration
	// MaxLookback bounds how many receipts back the duplicate search goes. Default 1024.
	MaxLookback int
	// CacheWindow is how long a receipt stays among a chain's remembered receipts after it
	// was appended or read (the head always stays); a duplicate search reaching further back
	// reads the older receipts from the stream again. It bounds a Store's memory by the
	// append rate rather than by MaxLookback per chain. Default 2 × MaxClockSkew.
	CacheWindow time.Duration
	// MaxAttempts bounds the appends tried when another appender keeps winning the tail.
	// Default 64.
	MaxAttempts int
	// MaxCachedChains bounds the chain tails kept in memory; the cache is emptied when it is
	// exceeded. Default 10000.
	MaxCachedChains int
	// OnForeign, if set, is called for each foreign message found on a chain's subject when the
	// tail is read ([ForeignReporter] publishes it as an anomaly). The message is skipped either way.
	OnForeign func(context.Context, readmodel.Foreign)
}

func (o StoreOptions) withDefaults() StoreOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = time.Minute
	}
	if o.MaxLookback <= 0 {
		o.MaxLookback = 1024
	}
	if o.CacheWindow <= 0 {
		o.CacheWindow = 2 * o.MaxClockSkew
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 64
	}
	if o.MaxCachedChains <= 0 {
		o.MaxCachedChains = 10000
	}
	return o
}

// Store appends receipts to, and reads, the chains in LAVA_RECEIPTS (which must exist:
// bus.EnsureTopology). It is safe for concurrent use, and any number of Stores, in any number
// of processes, may append to the same chain.
type Store struct {
	js   jetstream.JetStream
	opts StoreOptions

	mu     sync.Mutex
	stream jetstream.Stream
	locks  map[string]*chainLock
	tails  map[string]*tail
}

// chainLock serializes this process's appends to one chain (replicas race through the
// expected-sequence check instead).
type chainLock struct {
	mu   sync.Mutex
	refs int
}

// unboundedLookback is how far back the duplicate search goes for an append without
// AppendRequest.NotBefore (at most MaxLookback).
const unboundedLookback = 32

// tail is what a Store remembers of a chain's end.
type tail struct {
	seq  uint64          // stream sequence of head
	last uint64          // stream sequence of the subject's last message (head, or a foreign one after it)
	head *lavav1.Receipt // the newest receipt
	// phases is the head's [readmodel.HeaderPhasesSeq] (an empty chain: 0, known).
	phases readmodel.PhasesSeq
	// recent are the newest receipts' stream positions, newest first; recent[0].seq == seq.
	recent []entry
}

type entry struct {
	seq, prevSeq uint64
	eventID      string
	stored       time.Time
}

// NewStore returns a Store on js.
func NewStore(js jetstream.JetStream, opts StoreOptions) *Store {
	return &Store{js: js, opts: opts.withDefaults(), locks: map[string]*chainLock{}, tails: map[string]*tail{}}
}

// AppendRequest is one receipt to append.
type AppendRequest struct {
	// Resource names the chain (namespace and name required; uid enters the receipt id).
	Resource *lavav1.ResourceRef
	// Generation of the attested event (enters the receipt id).
	Generation int64
	// EventID of the attested event (required): the receipt id and the duplicate check.
	EventID string
	// Kind is readmodel.KindOutcome or readmodel.KindAnomaly, matching Payload.
	Kind    string
	Payload *lavav1.ReceiptPayload
	// NotBefore is when the attested event was stored in its stream (bus.Message.Published):
	// no receipt of it can be older, which bounds the duplicate search (to MaxLookback
	// receipts). Zero searches only the newest 32 receipts (and JetStream's duplicate window).
	NotBefore time.Time
	// PhasesSeq is the attested event's stream sequence in LAVA_PHASES (bus.Message.StreamSeq);
	// 0 for an event of another stream (an anomaly), which is appended where it comes.
	PhasesSeq uint64
	// Earlier, with PhasesSeq, returns the resource's attested events of LAVA_PHASES stored
	// after stream sequence after and before PhasesSeq, in stream order ([Service] reads
	// them by subject). Append appends their receipts first, so a chain holds the receipts of
	// the resource's phase events in stream order whichever replica or handler gets which
	// event first. Nil: no catch-up (the receipt is appended after the head).
	Earlier func(ctx context.Context, after uint64) ([]AppendRequest, error)
}

// Appended is the result of [Store.Append].
type Appended struct {
	// Receipt is the receipt of the event: the new head, or the earlier receipt when
	// Duplicate.
	Receipt *lavav1.Receipt
	// StreamSeq is the receipt's sequence in LAVA_RECEIPTS.
	StreamSeq uint64
	// Duplicate is true when the event was already recorded and nothing was appended.
	Duplicate bool
	// Conflicts counts appends lost to another appender before this one succeeded.
	Conflicts int
}

// Append appends the receipt of one event to its resource's chain, unless the event is
// already recorded. It takes the chain's tail (the one this Store last wrote, else read from
// the stream), builds the next receipt ([readmodel.NewReceipt]) and publishes it with the
// expected last subject sequence of that tail and Nats-Msg-Id [ReceiptID]; when another
// appender moved the tail first, it reads the real tail and tries again (up to MaxAttempts,
// then [ErrConflict]). An event is already recorded when a receipt with its event id is among
// the receipts stored since req.NotBefore minus MaxClockSkew (at most MaxLookback back; the
// newest 32 without NotBefore), or when JetStream reports the receipt id as a duplicate; then
// Appended.Duplicate is set and Appended.Receipt is the earlier receipt. With req.PhasesSeq and
// req.Earlier, the receipts of the earlier events Earlier returns for the head's
// [readmodel.HeaderPhasesSeq] are appended first, in stream order, each with its own
// expected-sequence check (a lost race re-reads the tail and starts over); errors of Earlier
// are returned wrapped.
func (s *Store) Append(ctx context.Context, req AppendRequest) (*Appended, error) {
	ns, name := req.Resource.GetNamespace(), req.Resource.GetName()
	if ns == "" || name == "" || req.EventID == "" {
		return nil, fmt.Errorf("%w: resource namespace, name and event id are required", ErrInvalidRequest)
	}
	if err := readmodel.CheckPayloadKind(req.Kind, req.Payload); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	stream, err := s.receipts(ctx)
	if err != nil {
		return nil, err
	}
	subject := bus.ReceiptSubject(ns, name)
	unlock := s.lock(subject)
	defer unlock()

	start := s.opts.Now()
	var cutoff time.Time
	if !req.NotBefore.IsZero() {
		cutoff = req.NotBefore.Add(-s.opts.MaxClockSkew)
	}
	for attempt := 0; attempt < s.opts.MaxAttempts; attempt++ {
		// Optimistic: trust this process's view of the tail first; if another appender moved
		// it, the expected-sequence check fails and the next attempt reads the real tail.
		var t *tail
		if cached := s.cached(subject); attempt == 0 && cached != nil {
			t, err = s.extend(ctx, stream, cached, cutoff)
		} else {
			t, err = s.refresh(ctx, stream, subject, cutoff)
		}
		if err != nil {
			return nil, err
		}
		if seq, ok := t.find(req.EventID); ok {
			return s.duplicate(ctx, stream, seq, attempt)
		}
		// Phase order (docs/design/0018-receipt-order-across-replicas.md): first the receipts of
		// the resource's earlier phase events that the chain does not hold yet, each with its
		// own expected-sequence check.
		if ph := t.phasesHead(); req.PhasesSeq > 0 && req.Earlier != nil && ph.OK && ph.Seq < req.PhasesSeq {
			earlier, err := req.Earlier(ctx, ph.Seq)
			if err != nil {
				return nil, fmt.Errorf("attest: read earlier events of %s: %w", subject, err)
			}
			lost := false
			for _, e := range earlier {
				if _, ok := t.find(e.EventID); ok || e.PhasesSeq <= t.phasesHead().Seq || e.PhasesSeq >= req.PhasesSeq {
					continue
				}
				next, won, err := s.publish(ctx, subject, t, e)
				if err != nil {
					return nil, err
				}
				if !won {
					lost = true
					break
				}
				if next.dupSeq != 0 {
					continue // recorded beyond the remembered tail: nothing was appended
				}
				s.opts.Metrics.appended(e.Kind, s.opts.Now().Sub(start))
				t = next.tail
			}
			if lost {
				continue
			}
		}
		next, won, err := s.publish(ctx, subject, t, req)
		if err != nil {
			return nil, err
		}
		if !won {
			continue
		}
		if next.dupSeq != 0 {
			return s.duplicate(ctx, stream, next.dupSeq, attempt)
		}
		s.opts.Metrics.appended(req.Kind, s.opts.Now().Sub(start))
		return &Appended{Receipt: next.head, StreamSeq: next.seq, Conflicts: attempt}, nil
	}
	return nil, fmt.Errorf("%w: %s after %d attempts", ErrConflict, subject, s.opts.MaxAttempts)
}

// published is the result of [Store.publish]: the new tail, or dupSeq, the stream sequence
// of the receipt JetStream already holds under the receipt id.
type published struct {
	*tail
	dupSeq uint64
}

// publish appends req's receipt after t (nil: an empty chain) with the expected last subject
// sequence of t; won is false when another appender moved the tail first (the cached tail is
// then forgotten).
func (s *Store) publish(ctx context.Context, subject string, t *tail, req AppendRequest) (published, bool, error) {
	var head *lavav1.Receipt
	var tailSeq, lastSeq uint64
	if t != nil {
		head, tailSeq, lastSeq = t.head, t.seq, t.last
	}
	phases := t.phasesHead()
	if req.PhasesSeq > 0 {
		phases = readmodel.PhasesSeq{Seq: max(phases.Seq, req.PhasesSeq), OK: true}
	}
	r, err := readmodel.NewReceipt(head, req.Kind, req.Payload, s.opts.Now(), s.opts.Signer)
	if err != nil {
		return published{}, false, err
	}
	msgID := ReceiptID(req.Resource.GetUid(), req.Generation, req.EventID)
	m, err := readmodel.EncodeReceipt(subject, r, req.EventID, msgID, tailSeq, phases)
	if err != nil {
		return published{}, false, err
	}
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(lastSeq))
	if isWrongLastSequence(err) {
		s.opts.Metrics.conflict()
		s.forget(subject)
		return published{}, false, nil
	}
	if err != nil {
		return published{}, false, fmt.Errorf("attest: append to %s: %w", subject, err)
	}
	if ack.Duplicate {
		s.forget(subject)
		return published{dupSeq: ack.Sequence}, true, nil
	}
	return published{tail: s.remember(subject, t, ack.Sequence, tailSeq, r, req.EventID, phases, s.opts.Now())}, true, nil
}

// duplicate loads the earlier receipt of an already recorded event.
func (s *Store) duplicate(ctx context.Context, stream jetstream.Stream, seq uint64, conflicts int) (*Appended, error) {
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("attest: read recorded receipt %d: %w", seq, err)
	}
	r, err := readmodel.DecodeReceipt(raw.Header, raw.Data)
	if err != nil {
		return nil, fmt.Errorf("attest: stream sequence %d: %w", seq, err)
	}
	s.opts.Metrics.duplicate()
	return &Appended{Receipt: r, StreamSeq: seq, Duplicate: true, Conflicts: conflicts}, nil
}

// refresh returns the chain's tail, covering the receipts stored since cutoff (or
// MaxLookback receipts), from the cache where it is still current; nil for an empty chain.
func (s *Store) refresh(ctx context.Context, stream jetstream.Stream, subject string, cutoff time.Time) (*tail, error) {
	lookback := s.lookback(cutoff)
	last, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		s.forget(subject)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attest: read tail of %s: %w", subject, err)
	}
	cached := s.cached(subject)
	if cached != nil && cached.last == last.Sequence {
		return s.extend(ctx, stream, cached, cutoff)
	}
	head, err := readmodel.DecodeReceipt(last.Header, last.Data)
	if err == nil {
		if reason, _ := readmodel.Standalone(head, s.trust()); reason != "" {
			err = fmt.Errorf("%w: %s", readmodel.ErrCorrupt, reason)
		}
	}
	if err != nil {
		// Not a receipt this Store trusts as the head: a foreign message after it (docs/security.md,
		// "Receipts"). Read the whole chain to find the head, and report what is skipped.
		return s.relink(ctx, stream, subject, last.Sequence, cutoff)
	}
	t := &tail{seq: last.Sequence, last: last.Sequence, head: head, phases: readmodel.PhasesSeqOf(last.Header), recent: []entry{entryOf(last)}}
	// Splice: walk back until a receipt the cache already knows.
	known := map[uint64]int{}
	if cached != nil {
		for i, e := range cached.recent {
			known[e.seq] = i
		}
	}
	for len(t.recent) < lookback {
		prev := t.recent[len(t.recent)-1].prevSeq
		if prev == 0 {
			break
		}
		if i, ok := known[prev]; ok {
			t.recent = append(t.recent, cached.recent[i:]...)
			break
		}
		if t.recent[len(t.recent)-1].stored.Before(cutoff) {
			break
		}
		raw, err := stream.GetMsg(ctx, prev)
		if err != nil {
			return nil, fmt.Errorf("attest: walk back %s to stream sequence %d: %w", subject, prev, err)
		}
		t.recent = append(t.recent, entryOf(raw))
	}
	if len(t.recent) > s.opts.MaxLookback {
		t.recent = t.recent[:s.opts.MaxLookback]
	}
	return s.extend(ctx, stream, t, cutoff)
}

// trust is what the tail's fast path requires of the subject's last message: a valid signature
// by this Store's own key when it signs (a receipt signed with an earlier key still joins the
// chain on [Store.relink]'s full read, so a key rotation does not fork it).
func (s *Store) trust() readmodel.VerifyOptions {
	if s.opts.Signer != nil {
		return readmodel.VerifyOptions{RequireSignatures: true, PublicKey: s.opts.Signer.PublicKey()}
	}
	return readmodel.VerifyOptions{}
}

// relink reads the whole chain ([readmodel.ReadLinked], any valid signature) when the subject's
// last message (stream sequence last) is not a trusted receipt, reports each foreign message to
// StoreOptions.OnForeign, and returns the tail of the receipts that form the chain; nil when none.
func (s *Store) relink(ctx context.Context, stream jetstream.Stream, subject string, last uint64, cutoff time.Time) (*tail, error) {
	sub, err := bus.ParseSubject(subject)
	if err != nil {
		return nil, fmt.Errorf("attest: %w", err)
	}
	ns, name := sub.Namespace, sub.Name
	l, err := readmodel.ReadLinked(ctx, stream, ns, name, last, readmodel.VerifyOptions{})
	if err != nil {
		return nil, err
	}
	for _, f := range l.Foreign {
		s.opts.Metrics.foreign()
		if s.opts.OnForeign != nil {
			s.opts.OnForeign(ctx, f)
		}
	}
	s.forget(subject)
	if len(l.Members) == 0 {
		// Nothing but foreign messages: the chain starts at Genesis after them.
		return &tail{last: last}, nil
	}
	t := &tail{last: last}
	for i := len(l.Members) - 1; i >= 0 && len(t.recent) < s.opts.MaxLookback; i-- {
		m := l.Members[i]
		var prev uint64
		if i > 0 {
			prev = l.Members[i-1].StreamSeq
		}
		t.recent = append(t.recent, entry{seq: m.StreamSeq, prevSeq: prev, eventID: m.EventID, stored: m.Stored})
	}
	h := l.Members[len(l.Members)-1]
	t.seq, t.head, t.phases = h.StreamSeq, h.Receipt, h.PhasesSeq
	return s.extend(ctx, stream, t, cutoff)
}

// lookback is how many receipts back the duplicate search goes for cutoff (zero: unknown).
func (s *Store) lookback(cutoff time.Time) int {
	if cutoff.IsZero() {
		return min(unboundedLookback, s.opts.MaxLookback)
	}
	return s.opts.MaxLookback
}

// extend walks t further back until its oldest remembered receipt is older than cutoff, the
// chain's first receipt, or the lookback (MaxLookback receipts; 32 without a cutoff). The
// receipts read stay remembered, so a chain that is appended to quickly is walked once.
func (s *Store) extend(ctx context.Context, stream jetstream.Stream, t *tail, cutoff time.Time) (*tail, error) {
	lookback := s.lookback(cutoff)
	for len(t.recent) > 0 && len(t.recent) < lookback {
		oldest := t.recent[len(t.recent)-1]
		if oldest.prevSeq == 0 || oldest.stored.Before(cutoff) {
			break
		}
		raw, err := stream.GetMsg(ctx, oldest.prevSeq)
		if err != nil {
			return nil, fmt.Errorf("attest: walk back to stream sequence %d: %w", oldest.prevSeq, err)
		}
		t.recent = append(t.recent, entryOf(raw))
	}
	return t, nil
}

// phasesHead is the head's [readmodel.HeaderPhasesSeq]: 0 and known for an empty chain (nil, or only
// foreign messages).
func (t *tail) phasesHead() readmodel.PhasesSeq {
	if t == nil || t.head == nil {
		return readmodel.PhasesSeq{OK: true}
	}
	return t.phases
}

// find returns the stream sequence of the remembered receipt of eventID.
func (t *tail) find(eventID string) (uint64, bool) {
	if t == nil || t.head == nil {
		return 0, false
	}
	for _, e := range t.recent {
		if e.eventID == eventID {
			return e.seq, true
		}
	}
	return 0, false
}

func entryOf(m *jetstream.RawStreamMsg) entry {
	prev, err := strconv.ParseUint(m.Header.Get(readmodel.HeaderPrevSeq), 10, 64)
	if err != nil {
		prev = 0 // written without the header: the walk stops here
	}
	return entry{seq: m.Sequence, prevSeq: prev, eventID: m.Header.Get(readmodel.HeaderEventID), stored: m.Time}
}

// remember caches and returns the new head appended after old (nil for a new chain). It keeps
// old's receipts stored within CacheWindow of now and the newest one before that (where the
// next duplicate search stops without a read), at most MaxLookback in all, newest first.
func (s *Store) remember(subject string, old *tail, seq, prevSeq uint64, head *lavav1.Receipt, eventID string, phases readmodel.PhasesSeq, now time.Time) *tail {
	t := &tail{seq: seq, last: seq, head: head, phases: phases, recent: []entry{{seq: seq, prevSeq: prevSeq, eventID: eventID, stored: now}}}
	if old != nil {
		horizon := now.Add(-s.opts.CacheWindow)
		n := min(len(old.recent), s.opts.MaxLookback-1)
		for n > 1 && old.recent[n-2].stored.Before(horizon) {
			n--
		}
		t.recent = append(t.recent, old.recent[:n]...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tails) >= s.opts.MaxCachedChains {
		clear(s.tails)
	}
	s.tails[subject] = t
	return t
}

// cached returns this process's view of a chain's tail, nil if none.
func (s *Store) cached(subject string) *tail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tails[subject]
}

func (s *Store) forget(subject string) {
	s.mu.Lock()
	delete(s.tails, subject)
	s.mu.Unlock()
}

// lock takes this process's lock of one chain and returns its release.
func (s *Store) lock(subject string) func() {
	s.mu.Lock()
	l := s.locks[subject]
	if l == nil {
		l = &chainLock{}
		s.locks[subject] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(s.locks, subject)
		}
		s.mu.Unlock()
	}
}

// receipts returns the LAVA_RECEIPTS stream handle, looked up once.
func (s *Store) receipts(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := s.js.Stream(ctx, bus.StreamReceipts)
	if err != nil {
		return nil, fmt.Errorf("attest: stream %s: %w", bus.StreamReceipts, err)
	}
	s.mu.Lock()
	s.stream = st
	s.mu.Unlock()
	return st, nil
}

// isWrongLastSequence reports JetStream's answer to a publish whose expected last subject
// sequence was not the subject's last: another appender won the tail.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
