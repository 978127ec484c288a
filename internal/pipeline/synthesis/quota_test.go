package synthesis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lava-operator/lava/internal/pipeline/synthesis"
)

// TestArtifactQuota: a namespace's renders count within the window and one over the quota is
// refused with when the count frees; the same content counts once; another namespace has its
// own quota; a render leaves the count after the window.
func TestArtifactQuota(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	q := &synthesis.ArtifactQuota{Bytes: 100, Window: time.Hour, Now: func() time.Time { return now }}
	if err := q.Charge("team-a", "d1", 60); err != nil {
		t.Fatalf("first render: %v", err)
	}
	now = now.Add(time.Minute)
	if err := q.Charge("team-a", "d1", 60); err != nil {
		t.Errorf("the same content again: %v", err)
	}
	if err := q.Charge("team-b", "d2", 90); err != nil {
		t.Errorf("another namespace: %v", err)
	}
	err := q.Charge("team-a", "d3", 41)
	var qe *synthesis.QuotaExceededError
	if !errors.As(err, &qe) {
		t.Fatalf("a render past the quota: %v, want a QuotaExceededError", err)
	}
	if qe.Used != 60 || qe.Size != 41 || qe.Quota != 100 || qe.Namespace != "team-a" ||
		!qe.FreeAt.Equal(now.Add(-time.Minute).Add(time.Hour)) {
		t.Errorf("refusal = %+v", qe)
	}
	for _, want := range []string{"41 bytes", "team-a", "60 of 100 bytes", "--artifact-quota-bytes", "2026-12-07T13:00:00Z"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := q.Charge("team-a", "d4", 40); err != nil {
		t.Errorf("a refused render counted: a render within the quota after it: %v", err)
	}
	now = now.Add(time.Hour) // d1 and d4 (a minute later) have left the window
	if err := q.Charge("team-a", "d5", 100); err != nil {
		t.Errorf("after the window: %v", err)
	}
	if err := q.Charge("team-a", "d6", 1); err == nil {
		t.Error("a render past a full quota was admitted")
	}
	var none *synthesis.ArtifactQuota
	if err := none.Charge("team-a", "d7", 1<<40); err != nil {
		t.Errorf("no quota: %v", err)
	}
}
