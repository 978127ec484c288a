package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// Bucket is the JetStream KV bucket holding one [Record] per resource (docs/architecture.md section 3),
// declared with the rest of the topology by bus.EnsureTopology.
const Bucket = bus.BucketState

// Default limits.
const (
	// DefaultLockTTL is how long the lock of a holder [Options].HolderAlive cannot judge
	// ([ErrHolderUnknown]) is honoured before it may be taken over. A holder known to be gone
	// loses its lock at once, whatever its age.
	DefaultLockTTL = 15 * time.Minute
	// DefaultMaxStateBytes bounds a state body read from the backend or the artifact store.
	DefaultMaxStateBytes = 64 << 20
	// casAttempts bounds the compare-and-set retry loop of one update.
	casAttempts = 16
)

var (
	// ErrNotFound reports a resource that has no state (no record, or a record without a body).
	ErrNotFound = errors.New("state: not found")
	// ErrLocked reports a state locked by someone else; the error is a *[LockedError].
	ErrLocked = errors.New("state: locked")
	// ErrConflict reports a state write that would change the lineage of an existing state or
	// move its serial backwards.
	ErrConflict = errors.New("state: conflicting write")
	// ErrInvalidState reports a body that is not Terraform state format v4 JSON.
	ErrInvalidState = errors.New("state: invalid state body")
	// ErrLockLost reports a write under a lock ID the record no longer holds: the lock was
	// taken over (its holder's lease ended) and released, or force-released. The error wraps
	// [ErrLocked] too, so callers that give up on a lock held by another give up on it.
	ErrLockLost = errors.New("state: the writer's lock is no longer held")
	// ErrHolderUnknown is what a [HolderAlive] returns for a holder it cannot judge (a name
	// not tied to a lease); such a lock is honoured for [Options].LockTTL.
	ErrHolderUnknown = errors.New("state: lock holder not tied to a lease")
)

// LockedError is returned (wrapping [ErrLocked]) when a lock is held by someone else; Lock is
// the current holder's lock, Key the resource.
type LockedError struct {
	Key  Key
	Lock Lock
}

// Error names the holder and when the lock was taken.
func (e *LockedError) Error() string {
	return fmt.Sprintf("state %s is locked by %q (lock %s, %s since %s)", e.Key, e.Lock.Holder,
		e.Lock.ID, e.Lock.Operation, e.Lock.Created.UTC().Format(time.RFC3339))
}

// Unwrap returns [ErrLocked].
func (e *LockedError) Unwrap() error { return ErrLocked }

// Artifacts is the content-addressed artifact store (the object store "lava-artifacts";
// internal/platform/bus implements it). Put stores the reader's bytes and returns their digest (an
// opaque string, BLAKE3 hex in bus); PutBytes does the same for bytes in memory, in fewer round
// trips; Get returns the bytes stored under a digest, or an error when there are none.
type Artifacts interface {
	Put(ctx context.Context, r io.Reader) (digest string, err error)
	PutBytes(ctx context.Context, data []byte) (digest string, err error)
	Get(ctx context.Context, digest string) (io.ReadCloser, error)
}

// Record is a resource's entry in [Bucket]. Digest is empty while no state body was ever
// written (a lock can exist before the first state).
type Record struct {
	// Serial and Lineage are copied from the state body (Terraform's monotonically increasing
	// serial and the lineage UUID fixed when the state was first created).
	Serial  uint64 `json:"serial"`
	Lineage string `json:"lineage,omitempty"`
	// Digest is the artifact digest of the state body; Size its length in bytes.
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size,omitempty"`
	// UpdatedAt is when the body was last written (UTC).
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Lock is the current lock, nil when unlocked.
	Lock *Lock `json:"lock,omitempty"`
	// OrphanedBy is the metadata.uid of the deleted object that left this state behind with
	// deletionPolicy Orphan ([Store.Orphan]); OrphanedAt when. A new object of the same name
	// (another uid) must not plan against it until it is adopted ([Store.Adopt], `lava state
	// adopt NS/NAME`).
	OrphanedBy string    `json:"orphanedBy,omitempty"`
	OrphanedAt time.Time `json:"orphanedAt,omitzero"`
	// Intents are the creates the embedded engine started whose results no saved body holds
	// yet ([Store.AddIntents]; docs/design/0021). They live in the record, not the body, so
	// tofu and terraform never see them.
	Intents []Intent `json:"intents,omitempty"`
	// Pushed marks a body an operator pushed from a file ([Store.Push], `lava state push
	// NS/NAME FILE`): Lava did not write it. The applier holds the next plan against it for
	// approval while [Record.PushedUnapplied].
	Pushed *Pushed `json:"pushed,omitempty"`
	// Revision is the KV revision the record was read at (not stored).
	Revision uint64 `json:"-"`
}

// Intent is one create the embedded engine is about to make (docs/design/0021): written before
// the provider's ApplyResourceChange and removed in the same write as the state body holding
// the create's result. An intent whose address has no object in the body is a create whose
// result was lost (the applier died in between): the object may exist.
type Intent struct {
	// Address is the resource instance address as the engine names it ("testkit_file.a",
	// `module.m.x.y["k"]`); Module, Type, Name and IndexKey are its parts as state v4 writes
	// them (IndexKey: absent, a number or a string).
	Address  string `json:"address"`
	Module   string `json:"module,omitempty"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	IndexKey any    `json:"indexKey,omitempty"`
	// Provider is the state's provider reference (provider["registry.opentofu.org/hashicorp/aws"]).
	Provider string `json:"provider"`
	// Identity is the resource identity the provider planned for the object, JSON of the
	// type's identity schema, wholly known; absent when the provider planned none (no identity
	// support, or parts known only after the create). IdentityVersion is that identity schema's
	// version.
	Identity        json.RawMessage `json:"identity,omitempty"`
	IdentityVersion int64           `json:"identityVersion,omitempty"`
	// IdentitySensitive is set when the identity holds a sensitive value (one derived from a
	// Secret binding or a sensitive attribute): readers that print records mask it.
	IdentitySensitive bool `json:"identitySensitive,omitempty"`
	// Dependencies are the state dependencies the object will be recorded with.
	Dependencies []string `json:"dependencies,omitempty"`
	// ReplacesAtSerial, on the create half of a replacement, is the serial of the last state
	// body written before the intent: a current object at Address in a body of this serial or
	// older is the object being replaced (destroyed before this create, or deposed first when
	// CreateBeforeDestroy), never the one this create makes. 0 on a plain create.
	ReplacesAtSerial    uint64 `json:"replacesAtSerial,omitempty"`
	CreateBeforeDestroy bool   `json:"createBeforeDestroy,omitempty"`
	// Started is when the intent was written (UTC).
	Started time.Time `json:"started"`
}

// HasState reports whether a state body exists.
func (r Record) HasState() bool { return r.Digest != "" }

// Pushed is the mark [Store.Push] leaves on a record: the digest of the body pushed and when.
type Pushed struct {
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// PushedUnapplied reports whether the record's body is one an operator pushed and no apply
// has run against yet: appliedDigest is the digest of the body the last apply left ("" when
// there was none). Any write of another body (an apply that changed the state) or an apply
// that left the pushed body unchanged ends it.
func (r Record) PushedUnapplied(appliedDigest string) bool {
	return r.Pushed != nil && r.HasState() && r.Digest == r.Pushed.Digest && appliedDigest != r.Pushed.Digest
}

// Lock is a state lock. ID, Operation, Who, Info, Version and Path come from the Terraform
// CLI's lock info (statemgr.LockInfo); Holder names the process that asked for it (the http
// backend's username, e.g. the applier replica and operation); Created is the server's clock.
type Lock struct {
	ID        string    `json:"id"`
	Holder    string    `json:"holder"`
	Created   time.Time `json:"created"`
	Operation string    `json:"operation,omitempty"`
	Who       string    `json:"who,omitempty"`
	Info      string    `json:"info,omitempty"`
	Version   string    `json:"version,omitempty"`
	Path      string    `json:"path,omitempty"`
}

// HolderAlive reports whether a lock holder still exists (e.g. its work lease in
// "lava-leases" is live). false (and no error) means the holder is gone and its lock may be
// taken over at once; [ErrHolderUnknown] leaves the lock to its age ([Options].LockTTL); any
// other error makes the lock count as held.
type HolderAlive func(ctx context.Context, holder string) (bool, error)

// Options configures a [Store]. Zero values take the defaults.
type Options struct {
	// LockTTL: the lock of a holder HolderAlive cannot judge (or of any holder, without
	// HolderAlive) can be taken over once older than this (DefaultLockTTL).
	LockTTL time.Duration
	// HolderAlive checks a holder: a holder it reports gone loses its lock at once.
	HolderAlive HolderAlive
	// MaxStateBytes bounds a state body (DefaultMaxStateBytes).
	MaxStateBytes int64
	// Now is the clock (time.Now).
	Now func() time.Time
	// Logger receives lock take-overs and forced unlocks (slog.DiscardHandler when nil).
	Logger *slog.Logger
	// ArtifactQuota counts every body stored against its resource's namespace
	// (bus.ArtifactQuota.Add: a body is stored whatever the count, and the namespace's next
	// plan is refused instead); nil: not counted.
	ArtifactQuota *bus.ArtifactQuota
}

// Store is the durable state of every resource: records in [Bucket], bodies in [Artifacts].
// It is safe for concurrent use by any number of replicas: every change is a compare-and-set
// on the record's KV revision.
type Store struct {
	kv   jetstream.KeyValue
	art  Artifacts
	opts Options
}

// NewStore returns a Store over the "lava-state" KV bucket and the artifact store.
func NewStore(kv jetstream.KeyValue, art Artifacts, opts Options) *Store {
	if opts.LockTTL <= 0 {
		opts.LockTTL = DefaultLockTTL
	}
	if opts.MaxStateBytes <= 0 {
		opts.MaxStateBytes = DefaultMaxStateBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{kv: kv, art: art, opts: opts}
}

// MaxStateBytes is the configured bound on a state body.
func (s *Store) MaxStateBytes() int64 { return s.opts.MaxStateBytes }

// Get returns the resource's record; [ErrNotFound] when there is none.
func (s *Store) Get(ctx context.Context, key Key) (Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, err
	}
	r, err := s.get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if r == nil {
		return Record{}, fmt.Errorf("state %s: %w", key, ErrNotFound)
	}
	return *r, nil
}

// get returns nil (and no error) when the key has no record.
func (s *Store) get(ctx context.Context, key Key) (*Record, error) {
	e, err := s.kv.Get(ctx, key.kvKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state %s: read record: %w", key, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("state %s: decode record: %w", key, err)
	}
	r.Revision = e.Revision()
	return &r, nil
}

// Body returns the record and the state body; [ErrNotFound] when no body was ever written.
func (s *Store) Body(ctx context.Context, key Key) (Record, []byte, error) {
	r, err := s.Get(ctx, key)
	if err != nil {
		return Record{}, nil, err
	}
	if !r.HasState() {
		return r, nil, fmt.Errorf("state %s: %w", key, ErrNotFound)
	}
	rc, err := s.art.Get(ctx, r.Digest)
	if err != nil {
		return r, nil, fmt.Errorf("state %s: read body %s: %w", key, r.Digest, err)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, s.opts.MaxStateBytes+1))
	if err != nil {
		return r, nil, fmt.Errorf("state %s: read body %s: %w", key, r.Digest, err)
	}
	if int64(len(body)) > s.opts.MaxStateBytes {
		return r, nil, fmt.Errorf("state %s: body exceeds %d bytes", key, s.opts.MaxStateBytes)
	}
	return r, body, nil
}

// Header is the part of a Terraform state v4 body the store checks.
type Header struct {
	Version int    `json:"version"`
	Serial  uint64 `json:"serial"`
	Lineage string `json:"lineage"`
}

// ParseHeader reads version, serial and lineage from a state body; the error wraps
// [ErrInvalidState] unless it is version 4 JSON with a lineage.
func ParseHeader(body []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	if h.Version != 4 {
		return h, fmt.Errorf("%w: format version %d, want 4", ErrInvalidState, h.Version)
	}
	if h.Lineage == "" {
		return h, fmt.Errorf("%w: no lineage", ErrInvalidState)
	}
	return h, nil
}

// ManagedInstances lists the managed resource instances of a state v4 body by address
// ("type.name" with the index key, e.g. `testkit_file.a["x"]` or "terraform_data.d[0]"), in
// state order; deposed objects are listed with " (deposed KEY)". The error wraps
// [ErrInvalidState] for a body that is not JSON.
func ManagedInstances(body []byte) ([]string, error) {
	objs, err := ManagedObjects(body)
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Address
	}
	return out, err
}

// Object is a managed object of a state: its address as [ManagedInstances] writes it and its
// resource type.
type Object struct {
	Address, Type string
}

// ManagedObjects lists the managed objects of a state v4 body, in state order, as
// [ManagedInstances] does with their types. The error wraps [ErrInvalidState] for a body that
// is not JSON.
func ManagedObjects(body []byte) ([]Object, error) {
	var st struct {
		Resources []struct {
			Module    string `json:"module"`
			Mode      string `json:"mode"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				IndexKey json.RawMessage `json:"index_key"`
				Deposed  string          `json:"deposed"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	var out []Object
	for _, r := range st.Resources {
		if r.Mode != "managed" {
			continue
		}
		addr := r.Type + "." + r.Name
		if r.Module != "" {
			addr = r.Module + "." + addr
		}
		for _, in := range r.Instances {
			a := addr
			if len(in.IndexKey) > 0 && string(in.IndexKey) != "null" {
				a += "[" + string(in.IndexKey) + "]"
			}
			if in.Deposed != "" {
				a += " (deposed " + in.Deposed + ")"
			}
			out = append(out, Object{Address: a, Type: r.Type})
		}
	}
	return out, nil
}

// Put stores a new state body. lockID is the lock the writer holds ("" when it holds none):
// a locked state accepts only its lock's writes. The body must be state v4 JSON; for an
// existing state its lineage must be the same and its serial must not go backwards, else the
// error wraps [ErrConflict]. A lock held by another ID gives a *[LockedError]. The record's
// intents are kept.
func (s *Store) Put(ctx context.Context, key Key, body []byte, lockID string) (Record, error) {
	return s.PutResolving(ctx, key, body, lockID, nil)
}

// PutResolving is [Store.Put] that also removes the intents of the given addresses, in the
// same record write: the body holds their creates' results (or the creates made nothing).
func (s *Store) PutResolving(ctx context.Context, key Key, body []byte, lockID string, resolved []string) (Record, error) {
	return s.Commit(ctx, key, body, lockID, resolved, nil)
}

// Commit is one record write of an apply's journal: a new state body as [Store.Put] (nil keeps
// the body, serial and lineage the record has), the intents of resolved removed and added
// recorded (an intent replaces one of the same address; a zero Started is set to now). Errors
// as [Store.Put]; with a nil body the record is created when there is none.
func (s *Store) Commit(ctx context.Context, key Key, body []byte, lockID string, resolved []string, added []Intent) (Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, err
	}
	if len(added) > 0 {
		added = slices.Clone(added)
		for i := range added {
			resolved = append(resolved, added[i].Address)
			if added[i].Started.IsZero() {
				added[i].Started = s.opts.Now().UTC()
			}
		}
	}
	if body == nil {
		return s.editIntents(ctx, key, lockID, func(cur []Intent) []Intent {
			return append(withoutIntents(cur, resolved), added...)
		})
	}
	if int64(len(body)) > s.opts.MaxStateBytes {
		return Record{}, fmt.Errorf("state %s: %w: body exceeds %d bytes", key, ErrInvalidState, s.opts.MaxStateBytes)
	}
	h, err := ParseHeader(body)
	if err != nil {
		return Record{}, fmt.Errorf("state %s: %w", key, err)
	}
	// The body's upload overlaps the record's read: it is content-addressed, so a write refused
	// below leaves only an unreferenced artifact, which a collection removes. Commit returns
	// after the upload in every case (the caller may reuse body).
	type stored struct {
		digest string
		err    error
	}
	put := make(chan stored, 1)
	go func() {
		d, err := s.art.PutBytes(ctx, body)
		if err == nil {
			s.opts.ArtifactQuota.Add(key.Namespace, d, int64(len(body)))
		}
		put <- stored{d, err}
	}()
	var uploaded *stored
	defer func() {
		if uploaded == nil {
			<-put
		}
	}()
	return s.update(ctx, key, "write", func(cur *Record) (Record, bool, error) {
		if err := checkLock(key, cur, lockID); err != nil {
			return Record{}, false, err
		}
		next := Record{}
		if cur != nil {
			next = *cur
			if cur.HasState() {
				if cur.Lineage != h.Lineage {
					return Record{}, false, fmt.Errorf("state %s: %w: lineage %s would replace %s", key, ErrConflict, h.Lineage, cur.Lineage)
				}
				if h.Serial < cur.Serial {
					return Record{}, false, fmt.Errorf("state %s: %w: serial %d is older than %d", key, ErrConflict, h.Serial, cur.Serial)
				}
			}
		}
		if uploaded == nil {
			r := <-put
			uploaded = &r
		}
		if uploaded.err != nil {
			return Record{}, false, fmt.Errorf("state %s: store body: %w", key, uploaded.err)
		}
		next.Serial, next.Lineage, next.Digest, next.Size = h.Serial, h.Lineage, uploaded.digest, int64(len(body))
		next.UpdatedAt = s.opts.Now().UTC()
		if next.Pushed != nil && next.Pushed.Digest != next.Digest {
			next.Pushed = nil
		}
		next.Intents = append(withoutIntents(slices.Clone(next.Intents), resolved), added...)
		if len(next.Intents) == 0 {
			next.Intents = nil
		}
		return next, true, nil
	})
}

// AddIntents writes intents into the record (one write for all; an intent replaces one of the
// same address; a zero Started is set to now), creating the record if there is none. lockID is the lock the writer holds: a
// lock held by another ID gives a *[LockedError]. The body and its serial are not changed.
func (s *Store) AddIntents(ctx context.Context, key Key, lockID string, intents []Intent) (Record, error) {
	return s.Commit(ctx, key, nil, lockID, nil, intents)
}

// ResolveIntents removes the intents of the given addresses (all of them when addrs is empty)
// and returns the record as written; a record without them is left alone. lockID as for
// [Store.AddIntents]. `lava state forget-intent` calls it once an operator has made sure the
// interrupted creates left nothing behind.
func (s *Store) ResolveIntents(ctx context.Context, key Key, lockID string, addrs []string) (Record, error) {
	return s.editIntents(ctx, key, lockID, func(cur []Intent) []Intent {
		if len(addrs) == 0 {
			return nil
		}
		return withoutIntents(cur, addrs)
	})
}

// editIntents replaces the record's intents with edit's result under compare-and-set.
func (s *Store) editIntents(ctx context.Context, key Key, lockID string, edit func([]Intent) []Intent) (Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, err
	}
	return s.update(ctx, key, "intents", func(cur *Record) (Record, bool, error) {
		if err := checkLock(key, cur, lockID); err != nil {
			return Record{}, false, err
		}
		next := Record{}
		if cur != nil {
			next = *cur
		}
		next.Intents = edit(slices.Clone(next.Intents))
		if len(next.Intents) == 0 {
			next.Intents = nil
			if cur == nil || len(cur.Intents) == 0 {
				return next, false, nil
			}
		}
		return next, true, nil
	})
}

// update reads key's record, lets edit compute the next one from it (cur is nil when there is
// none; edit's false ends the update with its record unwritten, and its error is returned as
// is) and writes that with compare-and-set, reading again when another writer came first, at
// most casAttempts times. It returns the record written, with its new Revision; op names the
// update in the error when the attempts run out.
func (s *Store) update(ctx context.Context, key Key, op string, edit func(cur *Record) (Record, bool, error)) (Record, error) {
	for range casAttempts {
		cur, err := s.get(ctx, key)
		if err != nil {
			return Record{}, err
		}
		next, write, err := edit(cur)
		if err != nil || !write {
			return next, err
		}
		rev, err := s.write(ctx, key, cur, next)
		if errors.Is(err, errCAS) {
			continue
		}
		if err != nil {
			return Record{}, err
		}
		next.Revision = rev
		return next, nil
	}
	return Record{}, fmt.Errorf("state %s: %s: too many concurrent updates", key, op)
}

// checkLock lets a writer holding lockID ("" for none) write cur (nil: no record): a locked
// record only under its lock, and a writer that names a lock only while the record holds that
// lock (a writer whose lock was taken over and released must not replace what the new holder
// wrote with a state built before the takeover).
func checkLock(key Key, cur *Record, lockID string) error {
	if cur != nil && cur.Lock != nil && cur.Lock.ID != lockID {
		return &LockedError{Key: key, Lock: *cur.Lock}
	}
	if lockID != "" && (cur == nil || cur.Lock == nil) {
		return fmt.Errorf("state %s: %w: lock %s (%w)", key, ErrLockLost, lockID, ErrLocked)
	}
	return nil
}

// withoutIntents returns intents without those of the given addresses.
func withoutIntents(intents []Intent, addrs []string) []Intent {
	if len(addrs) == 0 || len(intents) == 0 {
		return intents
	}
	out := intents[:0:0]
	for _, in := range intents {
		if !slices.Contains(addrs, in.Address) {
			out = append(out, in)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// errCAS is a lost compare-and-set race; the caller re-reads and retries.
var errCAS = errors.New("state: revision changed")

// write stores next where cur (nil: no record) was read.
func (s *Store) write(ctx context.Context, key Key, cur *Record, next Record) (uint64, error) {
	b, err := json.Marshal(next)
	if err != nil {
		return 0, fmt.Errorf("state %s: encode record: %w", key, err)
	}
	var rev uint64
	if cur == nil {
		rev, err = s.kv.Create(ctx, key.kvKey(), b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return 0, errCAS
		}
	} else {
		rev, err = s.kv.Update(ctx, key.kvKey(), b, cur.Revision)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return 0, errCAS
		}
	}
	if err != nil {
		return 0, fmt.Errorf("state %s: write record: %w", key, err)
	}
	return rev, nil
}

// Lock takes the state lock described by l (ID and Holder required; Created is set here). It
// succeeds when the state is unlocked, already locked with the same ID, locked by a holder
// HolderAlive reports gone (at once), or locked by a holder it cannot judge for longer than
// LockTTL (take-overs are logged). Otherwise the error is a *[LockedError] describing the
// current lock.
func (s *Store) Lock(ctx context.Context, key Key, l Lock) (Lock, error) {
	if err := key.Validate(); err != nil {
		return Lock{}, err
	}
	if l.ID == "" {
		return Lock{}, fmt.Errorf("state %s: lock: empty lock id", key)
	}
	var taken Lock
	_, err := s.update(ctx, key, "lock", func(cur *Record) (Record, bool, error) {
		next := Record{}
		if cur != nil {
			next = *cur
			if held := cur.Lock; held != nil {
				if held.ID == l.ID {
					taken = *held
					return Record{}, false, nil
				}
				if !s.expired(ctx, *held) {
					return Record{}, false, &LockedError{Key: key, Lock: *held}
				}
				s.opts.Logger.WarnContext(ctx, "state lock taken over", "resource", key.String(),
					"lock_id", held.ID, "holder", held.Holder, "created", held.Created, "new_holder", l.Holder)
			}
		}
		l.Created = s.opts.Now().UTC()
		next.Lock = &l
		taken = l
		return next, true, nil
	})
	if err != nil {
		return Lock{}, err
	}
	return taken, nil
}

// expired reports whether a lock may be taken over: its holder is known to be gone, or it
// cannot be judged and the lock is older than LockTTL.
func (s *Store) expired(ctx context.Context, l Lock) bool {
	if s.opts.HolderAlive != nil {
		alive, err := s.opts.HolderAlive(ctx, l.Holder)
		switch {
		case err == nil:
			return !alive
		case !errors.Is(err, ErrHolderUnknown):
			return false
		}
	}
	return s.opts.Now().Sub(l.Created) >= s.opts.LockTTL
}

// Unlock releases the lock with the given ID. With force the current lock is released
// whatever its ID (`lava state unlock NS/NAME`; logged). Unlocking an unlocked state succeeds;
// a lock held under another ID (without force) gives a *[LockedError].
func (s *Store) Unlock(ctx context.Context, key Key, id string, force bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	_, err := s.update(ctx, key, "unlock", func(cur *Record) (Record, bool, error) {
		if cur == nil || cur.Lock == nil {
			return Record{}, false, nil
		}
		if !force && cur.Lock.ID != id {
			return Record{}, false, &LockedError{Key: key, Lock: *cur.Lock}
		}
		if force {
			s.opts.Logger.WarnContext(ctx, "state lock force-released", "resource", key.String(),
				"lock_id", cur.Lock.ID, "holder", cur.Lock.Holder, "created", cur.Lock.Created)
		}
		next := *cur
		next.Lock = nil
		return next, true, nil
	})
	return err
}

// Orphan marks the state of a deleted object (uid) as orphaned: its deletionPolicy was Orphan,
// so the state and its infrastructure stay, and a new object of the same name must adopt it
// explicitly. A missing state is left alone (nothing to orphan).
func (s *Store) Orphan(ctx context.Context, key Key, uid string) error {
	return s.mark(ctx, key, func(r *Record) { r.OrphanedBy, r.OrphanedAt = uid, s.opts.Now().UTC() })
}

// OrphanedIn returns how many states of namespace are orphaned ([Store.Orphan]) by another
// object than uid. Errors: listing or reading the records.
func (s *Store) OrphanedIn(ctx context.Context, namespace, uid string) (int, error) {
	keys, err := s.kv.ListKeysFiltered(ctx, "state."+token(namespace)+".*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("state: list the states of namespace %s: %w", namespace, err)
	}
	defer func() { _ = keys.Stop() }()
	n := 0
	for k := range keys.Keys() {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("state: read %s: %w", k, err)
		}
		var r Record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return 0, fmt.Errorf("state: decode %s: %w", k, err)
		}
		if r.OrphanedBy != "" && r.OrphanedBy != uid {
			n++
		}
	}
	return n, nil
}

// Adopt clears an [Store.Orphan] mark, so the object now named key plans against the state
// (and manages, changes or destroys what it records). A missing or unmarked state succeeds.
func (s *Store) Adopt(ctx context.Context, key Key) error {
	return s.mark(ctx, key, func(r *Record) { r.OrphanedBy, r.OrphanedAt = "", time.Time{} })
}

// mark applies change to an existing record with compare-and-set.
func (s *Store) mark(ctx context.Context, key Key, change func(*Record)) error {
	if err := key.Validate(); err != nil {
		return err
	}
	_, err := s.update(ctx, key, "mark", func(cur *Record) (Record, bool, error) {
		if cur == nil {
			return Record{}, false, nil
		}
		next := *cur
		change(&next)
		return next, true, nil
	})
	return err
}

// Forgotten is what [Store.Forget] keeps under "forgotten.<namespace>.<name>": the last record
// and when it was forgotten.
type Forgotten struct {
	Record      Record    `json:"record"`
	ForgottenAt time.Time `json:"forgottenAt"`
}

// Forget removes a resource's record. Call it only after a successful destroy of a resource
// whose deletionPolicy is Destroy. The last record is kept under the history key
// "forgotten.<namespace>.<name>", the record's KV history stays (a delete marker, not a
// purge) and the state bodies stay in the artifact store. A locked state gives a
// *[LockedError]; a missing one succeeds.
func (s *Store) Forget(ctx context.Context, key Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	cur, err := s.get(ctx, key)
	if err != nil || cur == nil {
		return err
	}
	if cur.Lock != nil {
		return &LockedError{Key: key, Lock: *cur.Lock}
	}
	b, err := json.Marshal(Forgotten{Record: *cur, ForgottenAt: s.opts.Now().UTC()})
	if err != nil {
		return fmt.Errorf("state %s: encode history: %w", key, err)
	}
	if _, err := s.kv.Put(ctx, key.historyKey(), b); err != nil {
		return fmt.Errorf("state %s: write history: %w", key, err)
	}
	if err := s.kv.Delete(ctx, key.kvKey(), jetstream.LastRevision(cur.Revision)); err != nil {
		return fmt.Errorf("state %s: forget: %w", key, err)
	}
	return nil
}

// ReplacedPrefix starts the keys under which [Store.Restore] keeps the record it replaced
// ("replaced.<namespace>.<name>", a [Forgotten] whose ForgottenAt is when it was replaced).
const ReplacedPrefix = "replaced."

// Restore makes a state body the store held before (digest, an artifact in the artifact store,
// such as the body the last apply left: readmodel.LastApplied.StateDigest) the resource's
// current state again, whatever the current record's lineage and serial: the way back, decided
// by an operator (`lava state restore NS/NAME`), after the record was deleted, or replaced by
// another lineage or an older serial out of band. It never runs under an operation: a locked
// state gives a *[LockedError]. The record's intents and orphan mark are kept. A current body of
// another digest is not lost: its record is kept under "replaced.<namespace>.<name>" ([Store.Replaced];
// its body stays in the artifact store, and the applier's collection keeps it). It returns the
// record written and the one replaced (nil when there was no body; when the current body already
// is digest nothing is written and replaced is nil). Errors: the body is missing from the
// artifact store or is not state v4 JSON (wrapping [ErrInvalidState]).
func (s *Store) Restore(ctx context.Context, key Key, digest string) (Record, *Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, nil, err
	}
	rc, err := s.art.Get(ctx, digest)
	if err != nil {
		return Record{}, nil, fmt.Errorf("state %s: read body %s to restore: %w", key, digest, err)
	}
	body, err := io.ReadAll(io.LimitReader(rc, s.opts.MaxStateBytes+1))
	rc.Close()
	if err != nil {
		return Record{}, nil, fmt.Errorf("state %s: read body %s to restore: %w", key, digest, err)
	}
	if int64(len(body)) > s.opts.MaxStateBytes {
		return Record{}, nil, fmt.Errorf("state %s: %w: body %s exceeds %d bytes", key, ErrInvalidState, digest, s.opts.MaxStateBytes)
	}
	h, err := ParseHeader(body)
	if err != nil {
		return Record{}, nil, fmt.Errorf("state %s: body %s: %w", key, digest, err)
	}
	return s.replace(ctx, key, opRestore, digest, h, int64(len(body)), nil)
}

// The operations of [Store.replace].
const (
	opRestore = "restore"
	opPush    = "push"
)

// PushOptions relax the checks of [Store.Push].
type PushOptions struct {
	// Lineage lets a body of another lineage replace the current state (`--force-lineage`).
	Lineage bool
	// Serial lets a body of the current lineage at a serial not later than the current one
	// replace it (`--force`).
	Serial bool
}

// CheckPush says whether a body of header h (digest) may replace the current record cur
// under opts: any body may replace no state; one of the current lineage only at a later
// serial (the same serial with other contents is another state too: a body may not be
// rewritten at its serial), unless opts.Serial; one of another lineage only with opts.Lineage.
// The current body itself is always accepted (nothing to write). The error wraps [ErrConflict]
// and names what was expected.
func CheckPush(key Key, cur Record, h Header, digest string, opts PushOptions) error {
	if !cur.HasState() || cur.Digest == digest {
		return nil
	}
	if h.Lineage != cur.Lineage {
		if opts.Lineage {
			return nil
		}
		return fmt.Errorf("state %s: %w: the file's lineage is %s, the state's is %s: it is another state; want lineage %s",
			key, ErrConflict, h.Lineage, cur.Lineage, cur.Lineage)
	}
	if h.Serial <= cur.Serial && !opts.Serial {
		return fmt.Errorf("state %s: %w: the file holds serial %d of lineage %s, the state serial %d; want a serial later than %d",
			key, ErrConflict, h.Serial, h.Lineage, cur.Serial, cur.Serial)
	}
	return nil
}

// Push makes body, a Terraform state v4 file an operator brings (`lava state push NS/NAME
// FILE`: a state OpenTofu or Terraform wrote, or one `lava state pull` saved), the
// resource's current state. [CheckPush] decides, under opts, whether it may replace the
// current one (errors wrap [ErrConflict]); a locked state gives a *[LockedError] (an operation
// is running). The record keeps its intents and orphan mark; a replaced body's record is kept
// as [Store.Restore] keeps it ([Store.Replaced]); the record is marked [Pushed], so the next
// plan against it is held for approval. It returns the record written and the one replaced
// (nil when there was none, or when body already is the current state: then nothing is
// written). A body that is not state v4 JSON gives an error wrapping [ErrInvalidState].
func (s *Store) Push(ctx context.Context, key Key, body []byte, opts PushOptions) (Record, *Record, error) {
	if err := key.Validate(); err != nil {
		return Record{}, nil, err
	}
	if int64(len(body)) > s.opts.MaxStateBytes {
		return Record{}, nil, fmt.Errorf("state %s: %w: the file exceeds %d bytes", key, ErrInvalidState, s.opts.MaxStateBytes)
	}
	h, err := ParseHeader(body)
	if err != nil {
		return Record{}, nil, fmt.Errorf("state %s: %w", key, err)
	}
	if _, err := ManagedInstances(body); err != nil {
		return Record{}, nil, fmt.Errorf("state %s: %w", key, err)
	}
	// The body is content-addressed: a push refused below leaves an unreferenced artifact,
	// which a collection removes.
	digest, err := s.art.PutBytes(ctx, body)
	if err != nil {
		return Record{}, nil, fmt.Errorf("state %s: store body: %w", key, err)
	}
	s.opts.ArtifactQuota.Add(key.Namespace, digest, int64(len(body)))
	return s.replace(ctx, key, opPush, digest, h, int64(len(body)), func(cur *Record) error {
		return CheckPush(key, *cur, h, digest, opts)
	})
}

// replace makes the body stored under digest (of header h and size bytes) key's current
// state, keeping the record it replaces under "replaced.<namespace>.<name>": the write of
// [Store.Restore] and [Store.Push]. check, when set, may refuse the current record (never nil
// when called) before anything is written. op (opRestore or opPush) names the operation in the
// log and in errors; opPush marks the record [Pushed], and a restore clears the mark.
func (s *Store) replace(ctx context.Context, key Key, op, digest string, h Header, size int64, check func(cur *Record) error) (Record, *Record, error) {
	var replaced *Record
	rec, err := s.update(ctx, key, op, func(cur *Record) (Record, bool, error) {
		replaced = nil
		if err := checkLock(key, cur, ""); err != nil {
			return Record{}, false, err
		}
		next := Record{}
		if cur != nil {
			next = *cur
			if cur.Digest == digest {
				return next, false, nil
			}
			if check != nil {
				if err := check(cur); err != nil {
					return Record{}, false, err
				}
			}
			if cur.HasState() {
				old := *cur
				b, err := json.Marshal(Forgotten{Record: old, ForgottenAt: s.opts.Now().UTC()})
				if err != nil {
					return Record{}, false, fmt.Errorf("state %s: encode the replaced record: %w", key, err)
				}
				if _, err := s.kv.Put(ctx, key.replacedKey(), b); err != nil {
					return Record{}, false, fmt.Errorf("state %s: keep the replaced record: %w", key, err)
				}
				replaced = &old
			}
		}
		next.Serial, next.Lineage, next.Digest, next.Size = h.Serial, h.Lineage, digest, size
		next.UpdatedAt = s.opts.Now().UTC()
		next.Pushed = nil
		if op == opPush {
			next.Pushed = &Pushed{Digest: digest, At: next.UpdatedAt}
		}
		return next, true, nil
	})
	if err != nil {
		return Record{}, nil, err
	}
	if replaced != nil {
		msg := "state restored"
		if op == opPush {
			msg = "state pushed"
		}
		s.opts.Logger.WarnContext(ctx, msg, "resource", key.String(), "digest", digest, "serial", h.Serial,
			"lineage", h.Lineage, "replaced_digest", replaced.Digest, "replaced_serial", replaced.Serial, "replaced_lineage", replaced.Lineage)
	}
	return rec, replaced, nil
}

// Replaced returns the record [Store.Restore] last replaced for a resource; [ErrNotFound] when
// none was.
func (s *Store) Replaced(ctx context.Context, key Key) (Forgotten, error) {
	if err := key.Validate(); err != nil {
		return Forgotten{}, err
	}
	return s.readForgotten(ctx, key, key.replacedKey(), "replaced record")
}

// History returns what [Store.Forget] kept for a resource; [ErrNotFound] when it was never
// forgotten.
func (s *Store) History(ctx context.Context, key Key) (Forgotten, error) {
	if err := key.Validate(); err != nil {
		return Forgotten{}, err
	}
	return s.readForgotten(ctx, key, key.historyKey(), "history")
}

// readForgotten reads the [Forgotten] under kvKey; what names it in errors.
func (s *Store) readForgotten(ctx context.Context, key Key, kvKey, what string) (Forgotten, error) {
	e, err := s.kv.Get(ctx, kvKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Forgotten{}, fmt.Errorf("state %s %s: %w", key, what, ErrNotFound)
	}
	if err != nil {
		return Forgotten{}, fmt.Errorf("state %s: read %s: %w", key, what, err)
	}
	var f Forgotten
	if err := json.Unmarshal(e.Value(), &f); err != nil {
		return Forgotten{}, fmt.Errorf("state %s: decode %s: %w", key, what, err)
	}
	return f, nil
}
