package tofu

import "testing"

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
