package envflag

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestApply_commandLineWinsThenEnvThenDefault(t *testing.T) {
	env := map[string]string{
		"LAVA_NATS_URL":       "nats://env:4222",
		"LAVA_REPLICAS":       "3",
		"LAVA_DRIFT_INTERVAL": "2m",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	url := fs.String("nats-url", "nats://default:4222", "")
	replicas := fs.Int("replicas", 1, "")
	interval := fs.Duration("drift-interval", time.Minute, "")
	level := fs.String("log-level", "info", "")
	if err := fs.Parse([]string{"--replicas=5"}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, "LAVA", lookup); err != nil {
		t.Fatal(err)
	}
	if *url != "nats://env:4222" || *replicas != 5 || *interval != 2*time.Minute || *level != "info" {
		t.Fatalf("got url=%s replicas=%d interval=%s level=%s", *url, *replicas, *interval, *level)
	}
}

func TestApply_invalidValueNamesVariable(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Int("replicas", 1, "")
	_ = fs.Parse(nil)
	err := Apply(fs, "LAVA", func(string) (string, bool) { return "many", true })
	if err == nil || !strings.Contains(err.Error(), "LAVA_REPLICAS") {
		t.Fatalf("err = %v, want one naming LAVA_REPLICAS", err)
	}
}
