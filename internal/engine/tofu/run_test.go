package tofu

import (
	"strings"
	"testing"
)

// TestSummariesOnly: of the CLI's human output with sensitive values in the configuration, a
// failed step's tail keeps each diagnostic's summary and position lines, never its detail,
// source line or values, nor a wrapped detail line that starts like a position.
func TestSummariesOnly(t *testing.T) {
	out := `
╷
│ Error: Duplicate object key
│
│   with terraform_data.d,
│   on main.tf.json line 1, in resource.terraform_data.d:
│    1: {"resource":{"terraform_data":{"d":{"input":"${ {for c in x : upper(local.pw) => c} }"}}}}
│     ├────────────────
│     │ local.pw has a sensitive value
│
│ Two different items produced the key "S3CR3T-X" in this 'for' expression.
│ on S3CR3T-X line 2 wrapped detail
╵
`
	got := summariesOnly(out)
	want := "Error: Duplicate object key\n" + hiddenDetail + "\n  with terraform_data.d,\n  on main.tf.json line 1, in resource.terraform_data.d:\n"
	if got != want {
		t.Errorf("summariesOnly =\n%s\nwant\n%s", got, want)
	}
}

// TestTailBuffer_outOfMemory: every message the Go runtime ends a CLI with when an allocation
// fails is seen, also split across writes: its exit status 2 reads as a plan with changes, so
// the message is what makes it a failure. "fatal error: out of memory" was missed: the plan
// of TestEngine_memoryBoundAttack then failed reading a plan file the CLI never wrote.
func TestTailBuffer_outOfMemory(t *testing.T) {
	for _, msg := range []string{"fatal error: runtime: cannot allocate memory", "fatal error: runtime: out of memory",
		"fatal error: out of memory", "fatal error: out of memory allocating heap arena map"} {
		b := &tailBuffer{max: 64}
		_, _ = b.Write([]byte(strings.Repeat("x", 100) + "\n" + msg[:10]))
		_, _ = b.Write([]byte(msg[10:] + "\n\ngoroutine 1 [running]:\n"))
		if !b.outOfMemory() {
			t.Errorf("%q not seen", msg)
		}
	}
	b := &tailBuffer{max: 64}
	_, _ = b.Write([]byte(`{"@level":"info","@message":"fatal error: is a resource name"}` + "\n"))
	if b.outOfMemory() {
		t.Error("an ordinary line was taken for the runtime's out of memory")
	}
}
