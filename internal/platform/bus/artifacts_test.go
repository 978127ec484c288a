package bus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lava-operator/lava/internal/platform/bus"
)

func TestArtifacts_fiveMiBRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	data := make([]byte, 5<<20)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(data)

	digest, err := store.Put(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if digest != bus.Digest(data) || !bus.ValidDigest(digest) {
		t.Fatalf("digest %s, want %s", digest, bus.Digest(data))
	}
	if ok, err := store.Has(ctx, digest); !ok || err != nil {
		t.Fatalf("Has = %v, %v", ok, err)
	}
	rc, err := store.Get(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d put", len(got), len(data))
	}

	// Same content again: same digest, still one object, no temporary left behind.
	again, err := store.Put(ctx, bytes.NewReader(data))
	if err != nil || again != digest {
		t.Fatalf("second Put = %s, %v", again, err)
	}
	obs := objectStore(t, js)
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != digest || infos[0].Size != uint64(len(data)) {
		t.Fatalf("object store lists %d objects (%v), want only %s", len(infos), names(infos), digest)
	}

	small, err := store.Put(ctx, strings.NewReader(`{"resource":{}}`))
	if err != nil || small != bus.Digest([]byte(`{"resource":{}}`)) {
		t.Fatalf("small Put = %s, %v", small, err)
	}
}

func names(infos []*jetstream.ObjectInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

func TestArtifacts_errors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	missing := bus.Digest([]byte("never stored"))
	if ok, err := store.Has(ctx, missing); ok || err != nil {
		t.Errorf("Has(missing) = %v, %v", ok, err)
	}
	if _, err := store.Get(ctx, missing); !errors.Is(err, bus.ErrArtifactNotFound) {
		t.Errorf("Get(missing): %v", err)
	}
	for _, bad := range []string{"", "ABC", strings.Repeat("A", 64), strings.Repeat("a", 63), "../" + strings.Repeat("a", 61)} {
		if _, err := store.Get(ctx, bad); !errors.Is(err, bus.ErrBadDigest) {
			t.Errorf("Get(%q): %v", bad, err)
		}
	}
	// Content stored under a wrong name is detected on read.
	obs := objectStore(t, js)
	wrong := bus.Digest([]byte("the real content"))
	if _, err := obs.PutBytes(ctx, wrong, []byte("tampered")); err != nil {
		t.Fatal(err)
	}
	rc, err := store.Get(ctx, wrong)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, bus.ErrDigestMismatch) {
		t.Errorf("reading tampered content: %v, want ErrDigestMismatch", err)
	}
}

// TestArtifacts_keyed: content with secret values is named by keyed BLAKE3
// ([bus.Artifacts.PutKeyed]): the name is neither the plain BLAKE3 nor the SHA-256 of the content
// (no offline dictionary oracle for whoever sees only the digest), readers get and verify it
// without the key, a put again names it the same, and tampered content under a keyed name is
// still detected.
func TestArtifacts_keyed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	data := []byte(`{"resource":{"terraform_data":{"d":{"input":"hunter22"}}}}`)
	d, err := store.PutKeyed(ctx, bytes.NewReader(data), key)
	if err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256(data)
	if d != bus.KeyedDigestForTest(data, key) || d != bus.KeyedDigest(data, key) || d == bus.Digest(data) || d == hex.EncodeToString(sha[:]) {
		t.Fatalf("keyed digest %s: want %s (KeyedDigest %s), not the plain BLAKE3 %s or SHA-256", d, bus.KeyedDigestForTest(data, key), bus.KeyedDigest(data, key), bus.Digest(data))
	}
	if again, err := store.PutKeyed(ctx, bytes.NewReader(data), key); err != nil || again != d {
		t.Errorf("put again: %s, %v; want %s", again, err, d)
	}
	rc, err := store.Get(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v", got, err)
	}
	if _, err := store.PutKeyed(ctx, bytes.NewReader(data), key[:16]); err == nil {
		t.Error("a 16-byte key passed")
	}
	// Tampered content under the keyed name, its metadata kept: detected.
	obs := objectStore(t, js)
	info, err := obs.GetInfo(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: d, Metadata: info.Metadata}, bytes.NewReader([]byte("tampered"))); err != nil {
		t.Fatal(err)
	}
	rc, err = store.Get(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.ReadAll(rc); !errors.Is(err, bus.ErrDigestMismatch) {
		t.Errorf("reading tampered keyed content: %v, want ErrDigestMismatch", err)
	}
}

// TestArtifacts_collectKeepsSharedChunks: a rename that stopped halfway (the artifact's name
// stored, the temporary name not yet removed: a NATS server lost in between) leaves two names
// on the same chunks. Collecting the temporary name removes only that name; the artifact still
// reads back whole (purging the chunks with the temporary object would break it, and every
// later Put of the same content would keep the broken artifact).
func TestArtifacts_collectKeepsSharedChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	data := bytes.Repeat([]byte("shared chunks "), 20000) // three chunks
	digest, err := store.Put(ctx, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	obs := objectStore(t, js)
	info, err := obs.GetInfo(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	// The temporary name the halfway rename left: the same object info under another name, as
	// the object store's meta message (ADR-20).
	left := *info
	left.Name = "tmp-halfway"
	left.ModTime = time.Time{}
	b, err := json.Marshal(left)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "$O."+bus.ObjectStoreArtifacts+".M."+base64.URLEncoding.EncodeToString([]byte(left.Name)), b); err != nil {
		t.Fatal(err)
	}
	res, err := store.Collect(ctx, bus.CollectOptions{MinAge: -time.Hour, Keep: func(d string) bool { return d == digest }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 || res.Kept != 1 {
		t.Errorf("collected %+v, want the temporary name deleted and the artifact kept", res)
	}
	if _, err := obs.GetInfo(ctx, left.Name); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the temporary name after the collection: %v, want not found", err)
	}
	rc, err := store.Get(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the artifact after the collection: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
}

// halfwayRename is a real object store whose first rename of a temporary name stops halfway, as
// when the NATS server is lost between the rename's two writes: the new name's meta message is
// stored (the same chunks, the new name) and the temporary name is not removed.
type halfwayRename struct {
	jetstream.ObjectStore
	js  jetstream.JetStream
	tmp *string
}

func (h halfwayRename) UpdateMeta(ctx context.Context, name string, meta jetstream.ObjectMeta) error {
	if *h.tmp != "" || !strings.HasPrefix(name, "tmp-") {
		return h.ObjectStore.UpdateMeta(ctx, name, meta)
	}
	*h.tmp = name
	info, err := h.GetInfo(ctx, name)
	if err != nil {
		return err
	}
	info.Name, info.Description, info.Headers, info.Metadata = meta.Name, meta.Description, meta.Headers, meta.Metadata
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := h.js.Publish(ctx, "$O."+bus.ObjectStoreArtifacts+".M."+base64.URLEncoding.EncodeToString([]byte(meta.Name)), b); err != nil {
		return err
	}
	return errors.New("nats: connection closed") // what the client sees when the server is lost
}

// TestArtifacts_putAfterHalfwayRename: a Put whose rename stopped halfway keeps the artifact:
// its name landed on the upload's chunks, so Put returns the digest, drops only the temporary
// name, and the content reads back whole (discarding the upload with its chunks would leave the
// artifact's name on nothing).
func TestArtifacts_putAfterHalfwayRename(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	var tmp string
	bus.WrapObjectStoreForTest(store, func(o jetstream.ObjectStore) jetstream.ObjectStore {
		return halfwayRename{ObjectStore: o, js: js, tmp: &tmp}
	})
	data := bytes.Repeat([]byte("halfway rename "), 20000) // three chunks
	digest, err := store.Put(ctx, bytes.NewReader(data))
	if err != nil {
		t.Errorf("Put after a halfway rename: %v, want the digest", err)
		digest = bus.Digest(data)
	}
	if tmp == "" {
		t.Fatal("the rename was never cut: the test exercised nothing")
	}
	if digest != bus.Digest(data) {
		t.Fatalf("digest %s, want %s", digest, bus.Digest(data))
	}
	// Whatever Put returned, the content put again reads back whole: a Put that finds the
	// digest present keeps that artifact, so lost chunks would stay lost.
	if _, err := store.Put(ctx, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	obs := objectStore(t, js)
	if _, err := obs.GetInfo(ctx, tmp); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the temporary name %s after Put: %v, want not found", tmp, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := store.Get(rctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the artifact after Put: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
}

// TestArtifacts_putBytes: PutBytes stores content under the digest Put gives it, with no
// temporary name left, reads back whole, and a second PutBytes of the same content keeps the
// artifact (the same object) and refreshes its modification time.
func TestArtifacts_putBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, js := newArtifacts(t)
	data := bytes.Repeat([]byte("put bytes "), 30000) // three chunks
	digest, err := store.PutBytes(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if digest != bus.Digest(data) {
		t.Fatalf("digest %s, want %s", digest, bus.Digest(data))
	}
	obs := objectStore(t, js)
	list, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != digest {
		var names []string
		for _, o := range list {
			names = append(names, o.Name)
		}
		t.Fatalf("objects after PutBytes: %v, want just %s", names, digest)
	}
	first := list[0]
	rc, err := store.Get(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	time.Sleep(10 * time.Millisecond) // the store's times have nanoseconds; make the refresh visible
	again, err := store.PutBytes(ctx, data)
	if err != nil || again != digest {
		t.Fatalf("second PutBytes: %s, %v; want %s", again, err, digest)
	}
	info, err := obs.GetInfo(ctx, digest)
	if err != nil {
		t.Fatal(err)
	}
	if info.NUID != first.NUID {
		t.Errorf("second PutBytes uploaded again (NUID %s, was %s)", info.NUID, first.NUID)
	}
	if !info.ModTime.After(first.ModTime) {
		t.Errorf("modification time %v after the second PutBytes, want after %v", info.ModTime, first.ModTime)
	}
	if d, err := store.Put(ctx, bytes.NewReader(data)); err != nil || d != digest {
		t.Errorf("Put of the same content: %s, %v; want %s", d, err, digest)
	}
}

// newArtifacts starts a bus with the test topology and returns its artifact store and the
// JetStream context it uses.
func newArtifacts(t *testing.T) (*bus.Artifacts, jetstream.JetStream) {
	t.Helper()
	_, js := startBus(t, testTopology)
	store, err := bus.NewArtifacts(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return store, js
}

// objectStore binds the object store under the artifact store, to look at its objects.
func objectStore(t *testing.T, js jetstream.JetStream) jetstream.ObjectStore {
	t.Helper()
	obs, err := js.ObjectStore(t.Context(), bus.ObjectStoreArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}
