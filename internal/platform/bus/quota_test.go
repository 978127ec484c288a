package bus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// TestArtifactQuota: a namespace's puts count within the window and one over the quota is
// refused with when the count frees; the same content counts once; Add counts past the
// quota and the next Charge is refused; another namespace has its own quota; a put leaves the
// count after the window.
func TestArtifactQuota(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	q := &bus.ArtifactQuota{Bytes: 100, Window: time.Hour, Now: func() time.Time { return now }}
	if err := q.Charge("team-a", "d1", 60); err != nil {
		t.Fatalf("first put: %v", err)
	}
	now = now.Add(time.Minute)
	if err := q.Charge("team-a", "d1", 60); err != nil {
		t.Errorf("the same content again: %v", err)
	}
	if err := q.Charge("team-b", "d2", 90); err != nil {
		t.Errorf("another namespace: %v", err)
	}
	err := q.Charge("team-a", "d3", 41)
	var qe *bus.QuotaExceededError
	if !errors.As(err, &qe) {
		t.Fatalf("a put past the quota: %v, want a QuotaExceededError", err)
	}
	if qe.Used != 60 || qe.Size != 41 || qe.Quota != 100 || qe.Namespace != "team-a" ||
		!qe.FreeAt.Equal(now.Add(-time.Minute).Add(time.Hour)) {
		t.Errorf("refusal = %+v", qe)
	}
	for _, want := range []string{"41 more bytes", "team-a", "60 of 100 bytes", "--artifact-quota-bytes", "2026-12-07T13:00:00Z"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := q.Charge("team-a", "d4", 40); err != nil {
		t.Errorf("a refused put counted: a put within the quota after it: %v", err)
	}
	q.Add("team-a", "state", 500) // a state body: stored whatever the count
	if err := q.Charge("team-a", "d5", 1); err == nil {
		t.Error("a put after Add took the namespace past its quota was admitted")
	}
	if err := q.Charge("team-b", "d6", 10); err != nil {
		t.Errorf("another namespace after team-a's Add: %v", err)
	}
	now = now.Add(time.Hour) // d1, d4 and the state body have left the window
	if err := q.Charge("team-a", "d7", 100); err != nil {
		t.Errorf("after the window: %v", err)
	}
	if err := q.Charge("team-a", "d8", 1); err == nil {
		t.Error("a put past a full quota was admitted")
	}
	var none *bus.ArtifactQuota
	if err := none.Charge("team-a", "d9", 1<<40); err != nil {
		t.Errorf("no quota: %v", err)
	}
}

// BenchmarkArtifactQuota_charge is the cost of one Charge with a window full of small puts
// (the nineteenth trial's 200,000 charges of 120 bytes took 168 s when every charge scanned
// the namespace's list): constant per put.
func BenchmarkArtifactQuota_charge(b *testing.B) {
	now := time.Unix(0, 0)
	q := &bus.ArtifactQuota{Bytes: 1 << 40, Window: time.Hour, Now: func() time.Time { return now }}
	digests := make([]string, 1<<16)
	for i := range digests {
		digests[i] = bus.Digest([]byte{byte(i), byte(i >> 8)})
	}
	for i := range 200_000 {
		now = now.Add(time.Millisecond)
		_ = q.Charge("team-a", digests[i%len(digests)]+string(rune(i)), 120)
	}
	b.ResetTimer()
	for i := range b.N {
		now = now.Add(time.Millisecond)
		if err := q.Charge("team-a", digests[i%len(digests)]+"-b", 120); err != nil {
			b.Fatal(err)
		}
	}
}
