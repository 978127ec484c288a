//go:build linux

package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadFile_limits: a file over MaxFileBytes is refused as ErrTooLarge, one of exactly the
// limit is read, and a FIFO is refused without waiting for a writer.
func TestReadFile_limits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := filepath.Join(dir, "at.yaml")
	if err := os.WriteFile(at, []byte("# "+strings.Repeat("x", MaxFileBytes-3)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(at); err != nil || len(data) != MaxFileBytes {
		t.Errorf("a file of exactly the limit: %d bytes, %v", len(data), err)
	}
	over := filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(over, []byte(strings.Repeat("x", MaxFileBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(over); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file over the limit: %v, want ErrTooLarge", err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v, want not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

// TestReader_readsChangedFilesOnly: a Reader parses an unchanged file once, a file changed
// (same size and modification time) again, and a file modified within the last two seconds
// at every call until its timestamps settle.
func TestReader_readsChangedFilesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "m.yaml")
	old := time.Now().Add(-time.Minute)
	write := func(data string, mtime time.Time) { writeAt(t, p, data, mtime) }
	var r Reader
	read := func() string {
		t.Helper()
		ms, errs, err := r.Read([]string{dir})
		if err != nil || len(errs) != 0 || len(ms) != 1 {
			t.Fatalf("Read: %v %v %v", ms, errs, err)
		}
		return ms[0].Object.Spec.Source.Name
	}
	write(strings.Replace(twoDocs[:strings.Index(twoDocs, "---")], "dns-record-set", "one", 1), old)
	for range 3 {
		read()
	}
	if r.Reads() != 1 {
		t.Errorf("%d reads of an unchanged file, want 1", r.Reads())
	}
	write(strings.Replace(twoDocs[:strings.Index(twoDocs, "---")], "dns-record-set", "two", 1), old)
	if got := read(); got != "two" || r.Reads() != 2 {
		t.Errorf("after a change of the same size and time: %q after %d reads, want two after 2", got, r.Reads())
	}
	write(strings.Replace(twoDocs[:strings.Index(twoDocs, "---")], "dns-record-set", "new", 1), time.Now().Add(-3*settleTime/2))
	read()
	read()
	if r.Reads() != 4 {
		t.Errorf("%d reads, want 4: a file modified within the racy window is read at every call", r.Reads())
	}
}

// TestReader_halfWrittenFileKeepsItsObjects: a file written in place is empty (or cut short)
// between its truncation and its write; read then, its objects were gone from the result and
// lava up destroyed them (seen in TestPlanSpeculative_workflow under load). A file modified
// less than settleTime ago keeps what was read of it before; once it settles it is read, and a
// file that is really emptied gives up its objects.
func TestReader_halfWrittenFileKeepsItsObjects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "m.yaml")
	write := func(data string, mtime time.Time) { writeAt(t, p, data, mtime) }
	var r Reader
	count := func() int {
		t.Helper()
		ms, errs, err := r.Read([]string{dir})
		if err != nil || len(errs) != 0 {
			t.Fatalf("Read: %v %v", errs, err)
		}
		return len(ms)
	}
	write(twoDocs, time.Now().Add(-time.Minute))
	if n := count(); n != 2 {
		t.Fatalf("%d manifests, want 2", n)
	}
	write("", time.Now()) // truncated, not written yet
	if n := count(); n != 2 {
		t.Errorf("a file truncated just now: %d manifests, want the 2 read before", n)
	}
	write(twoDocs[:strings.Index(twoDocs, "---")], time.Now()) // cut short
	if n := count(); n != 2 {
		t.Errorf("a file cut short just now: %d manifests, want the 2 read before", n)
	}
	write("", time.Now().Add(-3*settleTime/2)) // emptied for good
	if n := count(); n != 0 {
		t.Errorf("a file emptied %v ago: %d manifests, want 0", 3*settleTime/2, n)
	}
	q := filepath.Join(dir, "new.yaml") // a new file is read at once
	if err := os.WriteFile(q, []byte(twoDocs), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Errorf("a new file: %d manifests, want 2", n)
	}
}

// writeAt writes data to p and sets its modification time to mtime.
func writeAt(t *testing.T, p, data string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
