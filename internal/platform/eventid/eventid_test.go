package eventid_test

import (
	"bytes"
	"encoding/hex"
	"math"
	"regexp"
	"testing"
	"time"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/eventid"
)

type input struct {
	uid, eventType, trigger string
	generation              int64
}

func (in input) id() string {
	return eventid.ID(in.uid, in.generation, in.eventType, in.trigger)
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestIDGolden pins the encoding: if this changes, ids computed by deployed services no longer
// match and JetStream stops de-duplicating across an upgrade.
func TestIDGolden(t *testing.T) {
	got := eventid.ID("6f1c2a8e-0000-4000-8000-000000000001", 3, "lava.v1.Synthesized", "generation:3")
	// Cross-checked against an independent implementation of the documented encoding.
	const want = "9c287d8d2c6aac78e1a0acad83869de5a693d391f879d8e025ddbfca467f22d1"
	if got != want {
		t.Errorf("ID = %s, want %s (the event_id encoding is a contract; do not change it)", got, want)
	}
}

func TestEncodeLayout(t *testing.T) {
	got := eventid.Encode("u", -1, "T", "")
	var want []byte
	field := func(v []byte) {
		want = append(want, 0, 0, 0, 0, 0, 0, 0, byte(len(v)))
		want = append(want, v...)
	}
	field([]byte(eventid.Domain))
	field([]byte("u"))
	field([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	field([]byte("T"))
	field(nil)
	if !bytes.Equal(got, want) {
		t.Errorf("Encode =\n%s\nwant\n%s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
}

func TestIDDeterministicAndWellFormed(t *testing.T) {
	tests := []input{
		{},
		{uid: "uid", generation: 1, eventType: "lava.v1.ResourceObserved", trigger: "generation:1"},
		{uid: "ü-ñ", generation: math.MaxInt64, eventType: "x", trigger: "\x00"},
		{uid: "uid", generation: math.MinInt64, eventType: "y", trigger: "retry:apply:7"},
	}
	for _, in := range tests {
		a, b := in.id(), in.id()
		if a != b {
			t.Errorf("%+v: ID not deterministic: %s != %s", in, a, b)
		}
		if !hex64.MatchString(a) {
			t.Errorf("%+v: ID %q is not 64 lowercase hex digits", in, a)
		}
	}
}

func TestIDDistinctOnEachInput(t *testing.T) {
	base := input{uid: "uid-1", generation: 2, eventType: "lava.v1.Planned", trigger: "cause:abc"}
	tests := []struct {
		name string
		in   input
	}{
		{"uid", input{uid: "uid-2", generation: 2, eventType: "lava.v1.Planned", trigger: "cause:abc"}},
		{"generation", input{uid: "uid-1", generation: 3, eventType: "lava.v1.Planned", trigger: "cause:abc"}},
		{"negative generation", input{uid: "uid-1", generation: -2, eventType: "lava.v1.Planned", trigger: "cause:abc"}},
		{"event type", input{uid: "uid-1", generation: 2, eventType: "lava.v1.Applied", trigger: "cause:abc"}},
		{"trigger", input{uid: "uid-1", generation: 2, eventType: "lava.v1.Planned", trigger: "cause:abd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if base.id() == tt.in.id() {
				t.Errorf("ID(%+v) == ID(%+v)", base, tt.in)
			}
		})
	}
}

// TestNoConcatenationAmbiguity moves bytes across field boundaries; a plain concatenation would
// give every pair the same hash input.
func TestNoConcatenationAmbiguity(t *testing.T) {
	tests := []struct {
		name string
		a, b input
	}{
		{"uid/type", input{uid: "ab", eventType: "c"}, input{uid: "a", eventType: "bc"}},
		{"type/trigger", input{eventType: "lava.v1.Failed", trigger: "x"}, input{eventType: "lava.v1.Faile", trigger: "dx"}},
		{"uid/trigger across type", input{uid: "a", trigger: ""}, input{uid: "", trigger: "a"}},
		{"empty vs separator", input{uid: "a:", eventType: "b"}, input{uid: "a", eventType: ":b"}},
		{"length bytes in value", input{uid: "u\x00\x00\x00\x00\x00\x00\x00\x01x", eventType: ""}, input{uid: "u", eventType: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ea := eventid.Encode(tt.a.uid, tt.a.generation, tt.a.eventType, tt.a.trigger)
			eb := eventid.Encode(tt.b.uid, tt.b.generation, tt.b.eventType, tt.b.trigger)
			if bytes.Equal(ea, eb) {
				t.Fatalf("Encode(%+v) == Encode(%+v)", tt.a, tt.b)
			}
			if tt.a.id() == tt.b.id() {
				t.Errorf("ID(%+v) == ID(%+v)", tt.a, tt.b)
			}
		})
	}
}

func FuzzEncodeInjective(f *testing.F) {
	f.Add("ab", int64(1), "c", "d", "a", int64(1), "bc", "d")
	f.Add("", int64(0), "", "", "", int64(0), "", "\x00")
	f.Fuzz(func(t *testing.T, u1 string, g1 int64, e1, t1, u2 string, g2 int64, e2, t2 string) {
		same := u1 == u2 && g1 == g2 && e1 == e2 && t1 == t2
		eq := bytes.Equal(eventid.Encode(u1, g1, e1, t1), eventid.Encode(u2, g2, e2, t2))
		if eq != same {
			t.Errorf("inputs equal=%v but encodings equal=%v", same, eq)
		}
	})
}

func TestType(t *testing.T) {
	if got := eventid.Type(&lavav1.Synthesized{}); got != "lava.v1.Synthesized" {
		t.Errorf("Type(Synthesized) = %q", got)
	}
	if got := eventid.Type(&lavav1.RetryRequested{}); got != "lava.v1.RetryRequested" {
		t.Errorf("Type(RetryRequested) = %q", got)
	}
}

func TestTriggers(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 4500, time.FixedZone("x", 3600))
	tests := []struct{ got, want string }{
		{eventid.GenerationTrigger(7), "generation:7"},
		{eventid.ReconcileTrigger("2026-11-30T00:00:00Z"), "reconcile:2026-11-30T00:00:00Z"},
		{eventid.PolicyTrigger("12345"), "policy:12345"},
		{eventid.RetryTrigger("apply", 3), "retry:apply:3"},
		{eventid.CauseTrigger("ab12"), "cause:ab12"},
		{eventid.DriftTrigger(at), "drift:2026-11-30T00:02:03.0000045Z"},
		{eventid.AnomalyTrigger("f00d", 2), "anomaly:f00d:2"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func BenchmarkID(b *testing.B) {
	for b.Loop() {
		eventid.ID("6f1c2a8e-0000-4000-8000-000000000001", 3, "lava.v1.Synthesized", "cause:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	}
}
