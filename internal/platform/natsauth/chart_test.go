package natsauth_test

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/natsauth"
)

// chartValues returns the values `lava nats authorization --nats-chart-values` prints, parsed
// back from their YAML as the NATS chart reads them.
func chartValues(t *testing.T, keys map[string]string) map[string]any {
	t.Helper()
	out, err := natsauth.ChartValuesYAML(bus.Declare(bus.TopologyOptions{}), keys, natsauth.ChartOptions{KeySecret: "nats-js-key"})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("the values do not parse: %v\n%s", err, out)
	}
	return v
}

func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not a map at %s", path, p)
		}
		v = m[p]
	}
	return v
}

// TestChartValues_encryptionKeyFromSecret: the NATS chart values switch JetStream encryption at
// rest on with a cipher and a key that is a variable reference set from a Secret, never a
// literal, and carry the generated users.
func TestChartValues_encryptionKeyFromSecret(t *testing.T) {
	t.Parallel()
	keys, err := natsauth.GenerateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := chartValues(t, keys)
	if got := dig(t, v, "config", "jetstream", "enabled"); got != true {
		t.Errorf("config.jetstream.enabled = %v", got)
	}
	if got := dig(t, v, "config", "jetstream", "merge", "cipher"); got != natsauth.CipherChaCha {
		t.Errorf("cipher = %v", got)
	}
	if got := dig(t, v, "config", "jetstream", "merge", "key"); got != "<< $"+natsauth.DefaultKeyEnv+" >>" {
		t.Errorf("key = %v, want the unquoted variable reference << $%s >>", got, natsauth.DefaultKeyEnv)
	}
	ref := dig(t, v, "container", "env", natsauth.DefaultKeyEnv, "valueFrom", "secretKeyRef")
	if dig(t, ref, "name") != "nats-js-key" || dig(t, ref, "key") != "key" {
		t.Errorf("container.env.%s = %v, want a secretKeyRef to nats-js-key/key", natsauth.DefaultKeyEnv, ref)
	}
	users, _ := dig(t, v, "config", "merge", "authorization", "users").([]any)
	if len(users) != len(bus.Identities()) {
		t.Errorf("%d users, want one per identity (%d)", len(users), len(bus.Identities()))
	}
	if _, err := natsauth.ChartValues(bus.Declare(bus.TopologyOptions{}), keys, natsauth.ChartOptions{}); err == nil {
		t.Error("values without a key Secret were generated")
	}
}
