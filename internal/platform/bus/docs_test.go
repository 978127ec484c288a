package bus_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/platform/bus"
)

// TestDocs_consumerTable keeps the durable consumer table of docs/events.md equal to
// bus.Declare.
func TestDocs_consumerTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Durable consumers")
	if !ok {
		t.Fatal("docs/events.md has no \"### Durable consumers\" section")
	}
	var got []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`LAVA_") {
			continue
		}
		got = append(got, strings.Join([]string{strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])}, " | "))
	}
	var want []string
	for _, c := range bus.Declare(bus.TopologyOptions{}).Consumers {
		filters := make([]string, len(c.Config.FilterSubjects))
		for i, f := range c.Config.FilterSubjects {
			filters[i] = "`" + f + "`"
		}
		want = append(want, "`"+c.Stream+"` | `"+c.Config.Durable+"` | "+strings.Join(filters, ", "))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/events.md consumer table differs from bus.Declare (-declared +documented):\n%s", diff)
	}
}
