//go:build integration

package up

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/testutil/natstest"
)

// The attacks of docs/security.md "lava up's file source" on the Source itself: real NATS
// (the topology, ResourceObserved and DeletionRequested published), no services: what an
// attack would make the pipeline do is what the Source publishes and writes.

// doc is a LavaArchitecture manifest of ns/name whose inline source writes a terraform_data
// with input in.
func doc(ns, name, in string) string {
	return "apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: " + name + ", namespace: " + ns + "}\n" +
		"spec:\n  source:\n    inline: |\n      (deflava-architecture a\n        :resources ((terraform-data \"d\" :input \"" + in + "\")))\n"
}

// writeManifest writes the documents docs (joined by ---) to dir/name, with a modification
// time a minute ago, so the Source's reader trusts what it read of it (a file modified less
// than two seconds before a read is read again).
func writeManifest(t *testing.T, dir, name string, docs ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestSource starts a JetStream server with the topology and a Source over paths whose
// status directory is statusDir.
func newTestSource(t *testing.T, statusDir string, paths ...string) (*Source, jetstream.JetStream) {
	t.Helper()
	js := natstest.RunJetStream(t).JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(t.Context(), SourceConfig{JS: js, Paths: paths, StatusDir: statusDir})
	if err != nil {
		t.Fatal(err)
	}
	return src, js
}

func scan(t *testing.T, src *Source) {
	t.Helper()
	if err := src.Scan(t.Context(), false); err != nil {
		t.Fatalf("scan: %v", err)
	}
}

// objectOf returns the Source's object key ("ns/name"), nil when it has none.
func objectOf(src *Source, key string) *v1alpha1.LavaArchitecture {
	for _, o := range src.Objects() {
		if o.Namespace+"/"+o.Name == key {
			return &o
		}
	}
	return nil
}

// observed is how many ResourceObserved events LAVA_RESOURCES holds for ns/name.
func observed(t *testing.T, js jetstream.JetStream, ns, name string) uint64 {
	t.Helper()
	subj := bus.ResourceSubject(ns, name, bus.EventObserved)
	st, err := js.Stream(t.Context(), bus.StreamResources)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// TestSource_duplicateNameAttack: a new manifest file that sorts first and defines another
// file's namespace/name takes nothing over: both documents are errors, each naming the other,
// and the object keeps its uid, generation and spec, with nothing published for it; a
// namespace/name two files define from the start creates nothing. (Before: the first file won,
// the victim's file became the error, and the attacker's spec became generation 2 of the
// victim's object.)
func TestSource_duplicateNameAttack(t *testing.T) {
	dir := t.TempDir()
	victim := writeManifest(t, dir, "victim.yaml", doc("team-a", "app", "victim"))
	src, js := newTestSource(t, t.TempDir(), dir)
	scan(t, src)
	before := objectOf(src, "team-a/app")
	if before == nil || before.Generation != 1 {
		t.Fatalf("victim's object %+v, want generation 1", before)
	}

	attacker := writeManifest(t, dir, "0-attacker.yaml", doc("team-a", "app", "attacker"), doc("team-a", "fresh", "attacker"))
	writeManifest(t, dir, "victim.yaml", doc("team-a", "app", "victim"), doc("team-a", "fresh", "victim"))
	scan(t, src)
	scan(t, src)
	after := objectOf(src, "team-a/app")
	if after == nil || after.UID != before.UID || after.Generation != 1 || after.Spec.Source.Inline != before.Spec.Source.Inline ||
		after.Annotations[AnnotationFile] != victim {
		t.Fatalf("victim's object after the attack: %+v\nwant uid %s, generation 1, the victim's spec, file %s", after, before.UID, victim)
	}
	if n := observed(t, js, "team-a", "app"); n != 1 {
		t.Errorf("%d ResourceObserved for team-a/app, want 1 (its creation)", n)
	}
	if o := objectOf(src, "team-a/fresh"); o != nil {
		t.Errorf("team-a/fresh, defined by both files, was created: %+v", o)
	}
	fes, _ := src.FileErrors()
	got := map[string]string{}
	for _, fe := range fes {
		got[filepath.Base(fe.File)+" "+fe.Key] = fe.Error()
	}
	for _, k := range []struct{ file, key, other string }{
		{"victim.yaml", "team-a/app", attacker}, {"0-attacker.yaml", "team-a/app", victim},
		{"victim.yaml", "team-a/fresh", attacker}, {"0-attacker.yaml", "team-a/fresh", victim},
	} {
		if msg := got[k.file+" "+k.key]; !strings.Contains(msg, k.key+" is also defined at "+k.other+":") {
			t.Errorf("%s's error for %s = %q, want one naming %s", k.file, k.key, msg, k.other)
		}
	}
	if len(fes) != 4 {
		t.Errorf("file errors %v, want the four documents", fes)
	}
}

// TestSource_uidBelongsToItsFile: a document of another file never inherits an object's uid
// or state. Removed from its own file in the same scan as another file defines it, the object
// is destroyed (DeletionRequested, its spec unchanged), and only once it is gone does the
// other file's document create a new object (new uid, generation 1). While the object's own
// file cannot be read, the other file's document waits as an error. (Before: the other file's
// spec became generation 2 of the object, same uid and state.)
func TestSource_uidBelongsToItsFile(t *testing.T) {
	// start creates team-a/app from victim.yaml and returns the Source and the object.
	start := func(t *testing.T) (dir, victim string, src *Source, js jetstream.JetStream, orig *v1alpha1.LavaArchitecture) {
		dir = t.TempDir()
		victim = writeManifest(t, dir, "victim.yaml", doc("team-a", "app", "victim"), doc("team-a", "other", "victim"))
		src, js = newTestSource(t, t.TempDir(), dir)
		scan(t, src)
		if orig = objectOf(src, "team-a/app"); orig == nil {
			t.Fatal("no victim object")
		}
		return dir, victim, src, js, orig
	}
	t.Run("removed in the same scan", func(t *testing.T) {
		dir, _, src, js, orig := start(t)
		writeManifest(t, dir, "victim.yaml", doc("team-a", "other", "victim"))
		attacker := writeManifest(t, dir, "attacker.yaml", doc("team-a", "app", "attacker"))
		scan(t, src)
		o := objectOf(src, "team-a/app")
		if o == nil || o.UID != orig.UID || o.Generation != 1 || o.Spec.Source.Inline != orig.Spec.Source.Inline || o.DeletionTimestamp == nil {
			t.Fatalf("after the victim removed it: %+v\nwant uid %s, generation 1, the victim's spec, deletion requested", o, orig.UID)
		}
		if n := observed(t, js, "team-a", "app"); n != 1 {
			t.Errorf("%d ResourceObserved for team-a/app, want 1 (the victim's)", n)
		}
		// Destroyed: the object is released; the attacker's document is a new object.
		if err := (fileStore{src}).Release(t.Context(), types.NamespacedName{Namespace: "team-a", Name: "app"}, orig.UID); err != nil {
			t.Fatal(err)
		}
		scan(t, src)
		o = objectOf(src, "team-a/app")
		if o == nil || o.UID == orig.UID || o.Generation != 1 || !strings.Contains(o.Spec.Source.Inline, "attacker") || o.Annotations[AnnotationFile] != attacker {
			t.Fatalf("after the victim's object was destroyed: %+v\nwant a new uid, generation 1, the attacker's spec and file", o)
		}
		if fes, _ := src.FileErrors(); len(fes) != 0 {
			t.Errorf("file errors %v, want none", fes)
		}
	})
	t.Run("its file unreadable", func(t *testing.T) {
		dir, victim, src, _, orig := start(t)
		writeManifest(t, dir, "victim.yaml", "a: [\n") // settled: modified a minute ago
		attacker := writeManifest(t, dir, "attacker.yaml", doc("team-a", "app", "attacker"))
		scan(t, src)
		if o := objectOf(src, "team-a/app"); o == nil || o.UID != orig.UID || o.Generation != 1 || o.DeletionTimestamp != nil {
			t.Fatalf("with the victim's file unreadable: %+v, want the victim's object unchanged", o)
		}
		fes, _ := src.FileErrors()
		waits := false
		for _, fe := range fes {
			waits = waits || fe.File == attacker && fe.Key == "team-a/app" && strings.Contains(fe.Error(), "is the object of "+victim+", which could not be read")
		}
		if !waits {
			t.Errorf("file errors %v, want the attacker's document waiting on %s", fes, victim)
		}
	})
}

// TestSource_statusFileNameAttack: a short name equal to a long name's cut status file name
// (the form earlier versions wrote: first 200 bytes, "-", 16 hex digits of its SHA-256) gets a
// file of its own: both objects are written and read back, and destroying the short one
// leaves the long one's file. (Before: both wrote one file, and releasing the short name
// removed the victim's status file.)
func TestSource_statusFileNameAttack(t *testing.T) {
	label := strings.Repeat("a", 63)
	long := label + "." + label + "." + label + "." + strings.Repeat("b", 61) // 253 characters
	sum := sha256.Sum256([]byte(long))
	short := long[:200] + "-" + hex.EncodeToString(sum[:8])
	if len(short)+len(".yaml.tmp") > 255 {
		t.Fatalf("%s is not short", short)
	}
	dir, status := t.TempDir(), t.TempDir()
	writeManifest(t, dir, "victim.yaml", doc("team-a", long, "victim"))
	writeManifest(t, dir, "attacker.yaml", doc("team-a", short, "attacker"))
	src, js := newTestSource(t, status, dir)
	scan(t, src)
	victim := objectOf(src, "team-a/"+long)
	if victim == nil || objectOf(src, "team-a/"+short) == nil {
		t.Fatalf("objects %v, want both", src.Objects())
	}
	reload := func() map[string]types.UID {
		t.Helper()
		again, err := NewSource(t.Context(), SourceConfig{JS: js, StatusDir: status})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]types.UID{}
		for _, o := range again.Objects() {
			out[o.Name] = o.UID
		}
		return out
	}
	if got := reload(); got[long] != victim.UID || got[short] == "" {
		t.Fatalf("status files read back: %v, want %s (%s) and %s", got, long, victim.UID, short)
	}
	// The attacker removes its document; once destroyed, its object file goes, the victim's stays.
	if err := os.Remove(filepath.Join(dir, "attacker.yaml")); err != nil {
		t.Fatal(err)
	}
	scan(t, src)
	if err := (fileStore{src}).Release(t.Context(), types.NamespacedName{Namespace: "team-a", Name: short}, objectOf(src, "team-a/"+short).UID); err != nil {
		t.Fatal(err)
	}
	if got := reload(); got[long] != victim.UID || len(got) != 1 {
		t.Fatalf("status files read back after the short one was released: %v, want only %s (%s)", got, long, victim.UID)
	}
}

// TestSource_manifestSizeAttack: a manifest file over manifest.MaxFileBytes (a valid document
// padded with a comment) is refused with a message naming the file and the limit, and creates
// nothing; a FIFO named as a manifest is refused without waiting for a writer. (Before: the
// whole file was read, 22 MB for 1 GB of memory every second, and the document applied; a
// FIFO blocked every scan.)
func TestSource_manifestSizeAttack(t *testing.T) {
	t.Run("over the limit", func(t *testing.T) {
		dir := t.TempDir()
		big := doc("team-a", "big", "x") + "# " + strings.Repeat("x", manifest.MaxFileBytes) + "\n"
		huge := writeManifest(t, dir, "huge.yaml", big)
		src, _ := newTestSource(t, t.TempDir(), dir)
		scan(t, src)
		if o := objectOf(src, "team-a/big"); o != nil {
			t.Errorf("the oversized manifest was applied: %+v", o)
		}
		fes, _ := src.FileErrors()
		want := huge + ": larger than the 1 MiB limit of a manifest file"
		if len(fes) != 1 || !strings.HasPrefix(fes[0].Error(), want) {
			t.Errorf("file errors %v, want one starting %q", fes, want)
		}
	})
	t.Run("a FIFO", func(t *testing.T) {
		dir := t.TempDir()
		fifo := filepath.Join(dir, "fifo.yaml")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		src, _ := newTestSource(t, t.TempDir(), dir)
		done := make(chan error, 1)
		go func() { done <- src.Scan(t.Context(), false) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the scan blocked on a FIFO named as a manifest")
		}
		fes, _ := src.FileErrors()
		if want := fifo + ": not a regular file"; len(fes) != 1 || !strings.HasPrefix(fes[0].Error(), want) {
			t.Errorf("file errors %v, want one starting %q", fes, want)
		}
	})
}

// TestSource_readsOnlyChangedFiles: an unchanged manifest file is read and parsed once, not at
// every scan; a change (here the same size and modification time, written anew) is read at
// the next scan.
func TestSource_readsOnlyChangedFiles(t *testing.T) {
	dir := t.TempDir()
	p := writeManifest(t, dir, "m.yaml", doc("team-a", "app", "one"))
	src, _ := newTestSource(t, t.TempDir(), dir)
	for range 5 {
		scan(t, src)
	}
	if n := src.reader.Reads(); n != 1 {
		t.Fatalf("the unchanged file was read %d times in 5 scans, want 1", n)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(doc("team-a", "app", "two")), 0o644); err != nil { // same size
		t.Fatal(err)
	}
	if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	scan(t, src)
	scan(t, src)
	if n := src.reader.Reads(); n != 2 {
		t.Errorf("%d reads after one change, want 2", n)
	}
	if o := objectOf(src, "team-a/app"); o == nil || o.Generation != 2 || !strings.Contains(o.Spec.Source.Inline, "two") {
		t.Errorf("object after the change: %+v, want generation 2 with the new spec", o)
	}
}

// TestSource_restartLooksAgainOnlyAtFailures: after a restart (a new Source over an earlier
// one's status directory, run by Run), the first scan observes every object; an object whose
// status file cannot be written at any scan (its namespace's status directory is a file) is
// tried again at each later scan alone, and an object whose ResourceObserved is over the
// bus's max_payload (a 20 KB inline source on a server of 16 KiB) is Failed with the sizes at
// once, not looked at again. Three objects looked at, then none; the failing one tried at
// every scan. (Before: a failed object kept Run in its first scan's mode, every object
// observed again at every scan, once a second: about 29 % of a core.)
func TestSource_restartLooksAgainOnlyAtFailures(t *testing.T) {
	js := natstest.Run(t, natstest.Config{MaxPayload: 16 << 10}).JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, status := t.TempDir(), t.TempDir()
	writeManifest(t, dir, "a.yaml", doc("team-a", "one", "1"), doc("team-a", "two", "2"), doc("team-a", "big", strings.Repeat("x", 20_000)))
	writeManifest(t, dir, "b.yaml", doc("team-b", "app", "b"))
	if err := os.WriteFile(filepath.Join(status, "team-b"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := SourceConfig{JS: js, Paths: []string{dir}, StatusDir: status}
	before, err := NewSource(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Scan(t.Context(), false); err == nil || !strings.Contains(err.Error(), "team-b/app: up: mkdir "+filepath.Join(status, "team-b")) {
		t.Fatalf("scan before the restart: %v, want team-b/app's status file refused", err)
	}

	src, err := NewSource(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, time.Hour) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	looked := func() int {
		src.scanMu.Lock()
		defer src.scanMu.Unlock()
		return src.looked
	}
	_ = src.ScanNow(ctx) // Run's first scan, then a second
	n := looked()
	if err := src.ScanNow(ctx); err == nil || !strings.Contains(err.Error(), "team-b/app") {
		t.Errorf("third scan: %v, want team-b/app's error", err)
	}
	if d := looked() - n; n != 3 || d != 0 {
		t.Errorf("objects looked at: %d in the first two scans, %d in the third; want 3 (team-a's, once) and 0 (team-b/app is tried, and fails before it is looked at)", n, d)
	}
	for _, name := range []string{"one", "two"} {
		if got := observed(t, js, "team-a", name); got != 1 {
			t.Errorf("%d ResourceObserved for team-a/%s, want 1", got, name)
		}
	}
	o := objectOf(src, "team-a/big")
	if o == nil {
		t.Fatal("no team-a/big")
	}
	ready := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady)
	if o.Status.Phase != v1alpha1.PhaseFailed || ready == nil || ready.Reason != v1alpha1.ReasonSpecTooLarge ||
		!strings.Contains(ready.Message, "bytes over the bus's limit of 16384 bytes") {
		t.Errorf("team-a/big: phase %s, Ready %+v; want Failed, %s, the limit of 16384 bytes", o.Status.Phase, ready, v1alpha1.ReasonSpecTooLarge)
	}
	if got := observed(t, js, "team-a", "big"); got != 0 {
		t.Errorf("%d ResourceObserved for team-a/big, want none", got)
	}
	// Refused again after the restart, at another time: the same sizes, so the same status.
	if was := objectOf(before, "team-a/big"); was == nil || !equality.Semantic.DeepEqual(was.Status, o.Status) {
		t.Errorf("team-a/big's status changed at the restart:\n%+v\nthen\n%+v", was, o.Status)
	}
}

// TestSource_namespaceFileRootRefused: a namespace whose file root below --file-root is not a
// usable directory (here a regular file planted in its place) creates no object: its document
// is an error of its file at its position, naming the directory and what to do, while another
// namespace's document applies. Once the directory is usable the object is created. (Before:
// the object was created and never observed, Pending until `lava up --once` timed out.)
func TestSource_namespaceFileRootRefused(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, "team-c")
	if err := os.WriteFile(planted, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeManifest(t, dir, "m.yaml", doc("team-a", "ok", "a"), doc("team-c", "x", "c"))
	js := natstest.RunJetStream(t).JetStream()
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(t.Context(), SourceConfig{JS: js, Paths: []string{dir}, StatusDir: t.TempDir(), FileRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	scan(t, src)
	if objectOf(src, "team-c/x") != nil || observed(t, js, "team-c", "x") != 0 {
		t.Fatal("an object of the namespace whose file root is refused was created or observed")
	}
	if objectOf(src, "team-a/ok") == nil || observed(t, js, "team-a", "ok") != 1 {
		t.Fatal("the other namespace's object was not created and observed once")
	}
	ferrs, _ := src.FileErrors()
	want := file + ":12:12: " // metadata.name of the second document
	var found bool
	for _, fe := range ferrs {
		msg := fe.Error()
		found = found || fe.Key == "team-c/x" && strings.HasPrefix(msg, want) &&
			strings.Contains(msg, "file root "+planted+" is not a directory") && strings.Contains(msg, "--file-root")
	}
	if !found {
		t.Fatalf("file errors %v: none for team-c/x at %s naming %s as not a directory", ferrs, want, planted)
	}

	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	scan(t, src)
	if objectOf(src, "team-c/x") == nil || observed(t, js, "team-c", "x") != 1 {
		t.Fatal("with the directory usable the object was not created and observed")
	}
	if ferrs, _ := src.FileErrors(); len(ferrs) != 0 {
		t.Errorf("file errors left: %v", ferrs)
	}
}
