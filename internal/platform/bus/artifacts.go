package bus

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"lukechampine.com/blake3"
)

// Artifact errors.
var (
	// ErrArtifactNotFound: no artifact has that digest.
	ErrArtifactNotFound = errors.New("bus: artifact not found")
	// ErrBadDigest: a digest that is not 64 lowercase hex digits.
	ErrBadDigest = errors.New("bus: bad artifact digest")
	// ErrDigestMismatch: the stored content does not hash to its name (corruption).
	ErrDigestMismatch = errors.New("bus: artifact content does not match its digest")
)

// Artifacts is the content-addressed store of Terraform JSON, plans and state bodies over the
// lava-artifacts object store. An artifact's name is the lowercase hex BLAKE3-256 digest of
// its content (64 characters), so events carry the digest, never the payload (the NATS
// default payload limit is 1 MiB; artifacts have no size limit and are streamed in chunks).
type Artifacts struct {
	obs jetstream.ObjectStore
	// stream is the object store's stream (OBJ_lava-artifacts), for purging the delete
	// markers of deleted objects ([Artifacts.delete]).
	stream jetstream.Stream
	// js publishes meta messages with compare-and-set ([Artifacts.refresh],
	// [Artifacts.deleteAt]).
	js jetstream.JetStream
}

// NewArtifacts binds lava-artifacts (created by [EnsureTopology]).
func NewArtifacts(ctx context.Context, js jetstream.JetStream) (*Artifacts, error) {
	obs, err := js.ObjectStore(ctx, ObjectStoreArtifacts)
	if err != nil {
		return nil, fmt.Errorf("bus: bind %s: %w", ObjectStoreArtifacts, err)
	}
	st, err := js.Stream(ctx, "OBJ_"+ObjectStoreArtifacts)
	if err != nil {
		return nil, fmt.Errorf("bus: bind %s: %w", ObjectStoreArtifacts, err)
	}
	return &Artifacts{obs: obs, stream: st, js: js}, nil
}

// metaSubject is the object store's meta subject of an object name (ADR-20).
func metaSubject(name string) string {
	return "$O." + ObjectStoreArtifacts + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// errGone: [Artifacts.refresh] found no live object under the name (never stored, or deleted
// by a collection); the caller stores the content again.
var errGone = errors.New("bus: artifact gone")

// metaAttempts bounds the compare-and-set retries of one refresh.
const metaAttempts = 16

// refresh rewrites the live object info of name (its modification time becomes now) with meta's
// description, headers and metadata. The write is a compare-and-set on the meta message it read
// (the subject's last sequence): jetstream's UpdateMeta reads the info and writes it back
// without one, so a collection's delete marker written in between was overwritten with the live
// info while the chunks were purged (a name on nothing, kept by every later Put as present:
// TestArtifacts_putRacingCollect). Here the collection's marker and the refresh cannot both
// win: errGone when the object is not there (any more).
func (a *Artifacts) refresh(ctx context.Context, name string, meta jetstream.ObjectMeta) error {
	subj := metaSubject(name)
	for range metaAttempts {
		m, err := a.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return errGone
		}
		if err != nil {
			return fmt.Errorf("bus: artifact %s: %w", name, err)
		}
		var info jetstream.ObjectInfo
		if json.Unmarshal(m.Data, &info) != nil || info.Deleted || info.NUID == "" {
			return errGone
		}
		info.Description, info.Headers, info.Metadata = meta.Description, meta.Headers, meta.Metadata
		_, err = a.publishMeta(ctx, subj, info, m.Sequence)
		if wrongLastSequence(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bus: refresh artifact %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("bus: refresh artifact %s: too many concurrent updates", name)
}

// publishMeta writes info as the object's meta message (a subject rollup, as the object store
// does) if the subject's last message is still last (its sequence).
func (a *Artifacts) publishMeta(ctx context.Context, subj string, info jetstream.ObjectInfo, last uint64) (*jetstream.PubAck, error) {
	info.ModTime = time.Time{}
	b, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subj)
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = b
	return a.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last))
}

// wrongLastSequence reports a compare-and-set publish that lost (another meta message came
// first).
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// deleteAt deletes the object whose meta message info (of name) is the subject's message at
// sequence last, only if it still is (compare-and-set: a refresh or a new Put meanwhile keeps
// it; false then), then purges its chunks and the delete marker (up to the marker: anything
// put after it stays).
func (a *Artifacts) deleteAt(ctx context.Context, name string, info jetstream.ObjectInfo, last uint64) (bool, error) {
	subj := metaSubject(name)
	info.Deleted = true
	info.Size, info.Chunks, info.Digest = 0, 0, ""
	ack, err := a.publishMeta(ctx, subj, info, last)
	if wrongLastSequence(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	chunks := "$O." + ObjectStoreArtifacts + ".C." + info.NUID
	if err := a.stream.Purge(ctx, jetstream.WithPurgeSubject(chunks)); err != nil {
		return true, fmt.Errorf("bus: purge the chunks of %s: %w", name, err)
	}
	if err := a.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(ack.Sequence+1)); err != nil {
		return true, fmt.Errorf("bus: purge the delete marker of %s: %w", name, err)
	}
	return true, nil
}

// delete deletes the object name and then its delete marker. The object store keeps a deleted
// object's metadata as a marker on the object's meta subject ("$O.<bucket>.M.<name, base64url>",
// the NATS object store specification, ADR-20), one per name: every artifact has a name of its
// own (a digest, or a temporary upload's), so the markers would grow with every artifact ever
// collected (a 2-hour create/update/delete soak of 100 objects left 86,000 meta subjects). The marker is
// purged up to its own sequence, so an object put under the same name after the delete stays.
func (a *Artifacts) delete(ctx context.Context, name string) error {
	if err := a.obs.Delete(ctx, name); err != nil {
		return err
	}
	subj := metaSubject(name)
	m, err := a.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bus: delete marker of %s: %w", name, err)
	}
	var info jetstream.ObjectInfo
	if json.Unmarshal(m.Data, &info) != nil || !info.Deleted {
		return nil // put again meanwhile: that object stays
	}
	if err := a.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(m.Sequence+1)); err != nil {
		return fmt.Errorf("bus: purge the delete marker of %s: %w", name, err)
	}
	return nil
}

// Digest returns the artifact name of data: lowercase hex BLAKE3-256.
func Digest(data []byte) string {
	sum := blake3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ValidDigest reports whether s is 64 lowercase hex digits.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if _, ok := unhex(s[i]); !ok {
			return false
		}
	}
	return true
}

// Put streams r into the store and returns its digest. The content is written once, under a
// temporary name while it is hashed, then renamed to its digest; if an artifact with that
// digest already exists the upload is discarded (content addressing makes Put idempotent).
// Memory use is bounded by the object store's chunk size, whatever the content's size.
func (a *Artifacts) Put(ctx context.Context, r io.Reader) (string, error) {
	return a.put(ctx, r, nil)
}

// PutBytes is [Artifacts.Put] for content already in memory. Its digest is known before any
// write, so it is stored under that name directly (no temporary name, no rename) and not sent
// at all when an artifact with that digest exists, whose modification time is refreshed
// instead (as Put does). Errors are the store's, wrapped.
//
// Two PutBytes of the same new content at once both upload it; the second replaces the first's
// chunks with identical ones, so a Get of the first's running meanwhile can fail (transient:
// the reader retries). Writers of one object's state and plans hold its lease, so this does not
// arise in Lava's own use.
func (a *Artifacts) PutBytes(ctx context.Context, data []byte) (string, error) {
	digest := Digest(data)
	err := a.refresh(ctx, digest, jetstream.ObjectMeta{Name: digest})
	if err == nil {
		return digest, nil
	}
	if !errors.Is(err, errGone) {
		return "", err
	}
	if _, err := a.obs.PutBytes(ctx, digest, data); err != nil {
		return "", fmt.Errorf("bus: put artifact %s: %w", digest, err)
	}
	return digest, nil
}

// keyedArtifactDomain separates keyed artifact names from any other use of the key.
const keyedArtifactDomain = "lava.artifact-digest.v1"

// contentDigestMeta is the object metadata key holding a keyed artifact's plain BLAKE3-256,
// which [Artifacts.Get] verifies the content against.
const contentDigestMeta = "lava-content-blake3"

// PutKeyed is [Artifacts.Put] for content that holds secret values (the Terraform JSON of a
// render with Secret bindings): the artifact's name, its digest, is BLAKE3-256 keyed with key
// (32 bytes: the installation's bindings key) over a domain string, a zero byte and the content,
// so a digest published in events or status is no offline dictionary oracle for the secrets.
// The plain BLAKE3 is kept in the object's metadata for [Artifacts.Get] to verify against.
func (a *Artifacts) PutKeyed(ctx context.Context, r io.Reader, key []byte) (string, error) {
	if len(key) != 32 {
		return "", fmt.Errorf("bus: keyed artifact needs a 32-byte key, got %d bytes", len(key))
	}
	return a.put(ctx, r, key)
}

// KeyedDigest is the name [Artifacts.PutKeyed] gives data with key (32 bytes), without
// storing it.
func KeyedDigest(data, key []byte) string {
	kh := keyedHash(key)
	_, _ = kh.Write(data)
	return hex.EncodeToString(kh.Sum(nil))
}

// keyedHash is the keyed BLAKE3-256 of an artifact name, its domain string written.
func keyedHash(key []byte) hash.Hash {
	kh := blake3.New(32, key)
	_, _ = kh.Write([]byte(keyedArtifactDomain + "\x00"))
	return kh
}

func (a *Artifacts) put(ctx context.Context, r io.Reader, key []byte) (string, error) {
	h := blake3.New(32, nil)
	w := io.Writer(h)
	var kh hash.Hash
	if key != nil {
		kh = keyedHash(key)
		w = io.MultiWriter(h, kh)
	}
	tmp := "tmp-" + rand.Text()
	up, err := a.obs.Put(ctx, jetstream.ObjectMeta{Name: tmp}, io.TeeReader(r, w))
	if err != nil {
		return "", fmt.Errorf("bus: put artifact: %w", err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	meta := jetstream.ObjectMeta{}
	if kh != nil {
		meta.Metadata = map[string]string{contentDigestMeta: digest}
		digest = hex.EncodeToString(kh.Sum(nil))
	}
	meta.Name = digest
	discard := func() {
		// Cleanup must outlive a cancelled ctx, or temporary objects leak.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCleanupTimeout)
		defer cancel()
		_ = a.delete(dctx, tmp)
	}
	// Present: refresh the artifact's modification time, since a collection
	// ([Artifacts.Collect]) keeps whatever was put within its MinAge, so the caller's reference
	// stays valid for it. Gone (or deleted by a collection meanwhile): the upload is renamed.
	switch err := a.refresh(ctx, digest, meta); {
	case err == nil:
		discard()
		return digest, nil
	case !errors.Is(err, errGone):
		discard()
		return "", err
	}
	err = a.obs.UpdateMeta(ctx, tmp, meta)
	if errors.Is(err, jetstream.ErrObjectAlreadyExists) {
		// A concurrent Put of the same content won.
		discard()
		return digest, nil
	}
	if err != nil {
		// A rename stores the new name first and then removes the old one; failing between
		// the two (a NATS server lost, as the chaos run does) leaves both names on the
		// same chunks, and deleting the temporary name would take the artifact's chunks too.
		cur, gerr := a.obs.GetInfo(ctx, digest)
		switch {
		case gerr == nil && cur.NUID == up.NUID:
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultCleanupTimeout)
			defer cancel()
			_ = a.dropName(dctx, tmp) // left over: Collect drops it later
			return digest, nil
		case errors.Is(gerr, jetstream.ErrObjectNotFound):
			discard()
		}
		// Otherwise unknown: the temporary object stays for Collect, which keeps shared chunks.
		return "", fmt.Errorf("bus: name artifact %s: %w", digest, err)
	}
	return digest, nil
}

// dropName removes the name of an object whose chunks another name holds too (a rename that
// stopped halfway): its meta subject is purged and the chunks stay.
func (a *Artifacts) dropName(ctx context.Context, name string) error {
	subj := metaSubject(name)
	if err := a.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("bus: drop the name %s: %w", name, err)
	}
	return nil
}

// Has reports whether an artifact with this digest exists.
func (a *Artifacts) Has(ctx context.Context, digest string) (bool, error) {
	if !ValidDigest(digest) {
		return false, fmt.Errorf("%w: %q", ErrBadDigest, digest)
	}
	_, err := a.obs.GetInfo(ctx, digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bus: artifact %s: %w", digest, err)
	}
	return true, nil
}

// Get opens the artifact with this digest for streaming. The reader verifies the content
// against the digest as it goes (for a keyed artifact, [Artifacts.PutKeyed], against the plain
// BLAKE3 in its metadata: readers need no key) and returns [ErrDigestMismatch] instead of
// io.EOF if they differ. ctx bounds the whole read. The caller closes the reader. A missing artifact is
// [ErrArtifactNotFound] (wrapped).
func (a *Artifacts) Get(ctx context.Context, digest string) (io.ReadCloser, error) {
	if !ValidDigest(digest) {
		return nil, fmt.Errorf("%w: %q", ErrBadDigest, digest)
	}
	res, err := a.obs.Get(ctx, digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrArtifactNotFound, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("bus: get artifact %s: %w", digest, err)
	}
	want := digest
	if info, ierr := res.Info(); ierr == nil && info.Metadata[contentDigestMeta] != "" {
		want = info.Metadata[contentDigestMeta]
	}
	return &verifyingReader{r: res, h: blake3.New(32, nil), want: want}, nil
}

type verifyingReader struct {
	r    jetstream.ObjectResult
	h    hash.Hash
	want string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%w: %s hashes to %s", ErrDigestMismatch, v.want, got)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.r.Close() }

// Defaults of the applier's artifact collection (its --artifact-collect-interval and
// --artifact-min-age): a superseded artifact put now is deleted at most
// DefaultCollectMinAge + DefaultCollectInterval later.
const (
	DefaultCollectInterval = 10 * time.Minute
	DefaultCollectMinAge   = time.Hour
)

// CollectOptions configures [Artifacts.Collect].
type CollectOptions struct {
	// MinAge keeps every object put (or put again) within this long before now, referenced or
	// not: events in flight carry digests no record names yet.
	MinAge time.Duration
	// Keep reports whether a digest is still referenced (a current state body, a held plan, the
	// last applied render); kept objects are never deleted.
	Keep func(digest string) bool
	// Now is the clock (time.Now).
	Now func() time.Time
}

// CollectResult counts what [Artifacts.Collect] did.
type CollectResult struct {
	// Kept and Deleted count objects; DeletedBytes is the size of those deleted.
	Kept, Deleted int
	DeletedBytes  uint64
}

// list returns the live objects of lava-artifacts: each meta subject's last message, with its
// time as ModTime. It reads the stream's meta subjects and then each one's last message rather
// than jetstream's List, whose ordered consumer waits forever when a message it is about to
// deliver is replaced by a subject rollup meanwhile (a refresh, a rename, another replica's
// delete; TestArtifacts_collectEndsWhileRefreshed).
func (a *Artifacts) list(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	si, err := a.stream.Info(ctx, jetstream.WithSubjectFilter("$O."+ObjectStoreArtifacts+".M.>"))
	if err != nil {
		return nil, err
	}
	subjects := slices.Sorted(maps.Keys(si.State.Subjects))
	var out []*jetstream.ObjectInfo
	for _, subj := range subjects {
		m, err := a.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var info jetstream.ObjectInfo
		if json.Unmarshal(m.Data, &info) != nil || info.Deleted || info.Name == "" {
			continue
		}
		info.ModTime = m.Time
		out = append(out, &info)
	}
	return out, nil
}

// Collect deletes the superseded objects of lava-artifacts: every artifact (and every
// temporary upload a crashed Put left) older than MinAge that Keep does not keep. An object
// put again meanwhile ([Artifacts.Put] refreshes its time) is re-checked just before its
// deletion and kept. Errors: listing or deleting fails (what was deleted stays deleted).
func (a *Artifacts) Collect(ctx context.Context, o CollectOptions) (CollectResult, error) {
	var res CollectResult
	if o.Now == nil {
		o.Now = time.Now
	}
	cutoff := o.Now().Add(-o.MinAge)
	infos, err := a.list(ctx)
	if err != nil {
		return res, fmt.Errorf("bus: list %s: %w", ObjectStoreArtifacts, err)
	}
	// Objects whose chunks another listed name holds too (a rename that stopped halfway) lose
	// only their name: deleting them would purge the other's chunks.
	holders := map[string]int{}
	for _, info := range infos {
		holders[info.NUID]++
	}
	for _, info := range infos {
		old := info.ModTime.Before(cutoff)
		if !old || (ValidDigest(info.Name) && o.Keep != nil && o.Keep(info.Name)) {
			res.Kept++
			continue
		}
		// Re-check the meta message and delete only that one (compare-and-set): a Put or
		// refresh after it keeps the object.
		m, err := a.stream.GetLastMsgForSubject(ctx, metaSubject(info.Name))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("bus: artifact %s: %w", info.Name, err)
		}
		var cur jetstream.ObjectInfo
		if json.Unmarshal(m.Data, &cur) != nil || cur.Deleted {
			continue
		}
		if !m.Time.Before(cutoff) || cur.NUID != info.NUID {
			res.Kept++
			continue
		}
		if holders[info.NUID] > 1 {
			if err := a.dropName(ctx, info.Name); err != nil {
				return res, err
			}
			holders[info.NUID]--
			res.Deleted++
			continue
		}
		deleted, err := a.deleteAt(ctx, info.Name, cur, m.Sequence)
		if err != nil {
			return res, fmt.Errorf("bus: delete artifact %s: %w", info.Name, err)
		}
		if !deleted {
			res.Kept++
			continue
		}
		res.Deleted++
		res.DeletedBytes += info.Size
	}
	return res, nil
}
