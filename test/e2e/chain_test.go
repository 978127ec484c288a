//go:build e2e

package e2e_test

import (
	"context"
	"crypto/sha1" //nolint:gosec // local_file's id is the SHA-1 of its content
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/test/e2e/harness"
)

// chainManifests: a producer whose greeting comes from the ConfigMap "chain-greeting" and whose
// output message is the file's content, and a consumer that binds that output (bindingsFrom
// outputsRef) into a file of its own, and its sensitive output token (the file's id, from the
// producer's outputs Secret) into another. DIR is replaced by the test.
const chainManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: chain-greeting, namespace: demo}
data: {greeting: hola}
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: chain-producer, namespace: demo}
spec:
  source:
    inline: |
      (deflava-architecture chain-producer
        :inputs ((:dir "/tmp") (:greeting "hello"))
        :resources ((local-file "p" :filename "{dir}/producer.txt" :content "{greeting}"))
        :outputs (:message (ref local-file "p" content) :token (sensitive (ref local-file "p" id))))
  bindings: {dir: DIR}
  bindingsFrom:
  - configMapRef: {name: chain-greeting}
---
apiVersion: lava.pleme.io/v1alpha1
kind: LavaArchitecture
metadata: {name: chain-consumer, namespace: demo}
spec:
  source:
    inline: |
      (deflava-architecture chain-consumer
        :inputs ((:dir "/tmp") (:message "none") (:token "none"))
        :resources ((local-file "c" :filename "{dir}/consumer.txt" :content "got {message}")
                    (local-file "t" :filename "{dir}/token.txt" :content "{token}")))
  bindings: {dir: DIR}
  bindingsFrom:
  - outputsRef: {name: chain-producer, key: message}
  - outputsRef: {name: chain-producer, key: token}
`

// testChain: the consumer reaches Applied after the producer, with the producer's outputs (the
// sensitive one never in either object's status or events); a
// change of the producer's bound ConfigMap re-renders and re-applies the producer and then
// the consumer, with no spec change; deleting the ConfigMap is a BindingSourceNotFound
// condition on the producer.
func testChain(ctx context.Context, t *testing.T, env *harness.Env, kc client.Client) {
	dir := env.Files(t)
	if _, err := env.Kubectl(ctx, strings.ReplaceAll(chainManifests, "DIR", dir), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	producer, consumer := resource{"demo", "chain-producer"}, resource{"demo", "chain-consumer"}
	p := waitPhase(ctx, t, env, kc, producer, v1alpha1.PhaseApplied, 3*time.Minute)
	c := waitPhase(ctx, t, env, kc, consumer, v1alpha1.PhaseApplied, 3*time.Minute)
	if p.Status.LastAppliedAt == nil || c.Status.LastAppliedAt == nil || c.Status.LastAppliedAt.Before(p.Status.LastAppliedAt) {
		t.Errorf("consumer applied at %v, before the producer (%v)", c.Status.LastAppliedAt, p.Status.LastAppliedAt)
	}
	if got := string(p.Status.Outputs["message"].Raw); got != `"hola"` {
		t.Errorf("producer outputs message %s, want \"hola\"", got)
	}
	checkFile(t, filepath.Join(dir, "producer.txt"), "hola")
	checkFile(t, filepath.Join(dir, "consumer.txt"), "got hola")
	// The sensitive output travels through the producer's outputs Secret only.
	// (local_file's id is the SHA-1 of its content; no spec holds it).
	token := fmt.Sprintf("%x", sha1.Sum([]byte("hola")))
	checkFile(t, filepath.Join(dir, "token.txt"), token)
	if _, ok := p.Status.Outputs["token"]; ok || p.Status.OutputsSecret == "" {
		t.Errorf("producer status outputs %v, outputsSecret %q: want token only in the outputs Secret", p.Status.Outputs, p.Status.OutputsSecret)
	}
	for _, r := range []resource{producer, consumer} {
		if desc := describe(ctx, t, env, r); strings.Contains(desc, token) {
			t.Errorf("%s: kubectl describe shows the sensitive output:\n%s", r, desc)
		}
		if out, _ := env.Kubectl(ctx, "", "get", "lava", r.name, "-n", r.ns, "-o", "yaml"); strings.Contains(out, token) {
			t.Errorf("%s: the object shows the sensitive output", r)
		}
	}

	// The ConfigMap changes; neither spec does.
	if _, err := env.Kubectl(ctx, "", "patch", "configmap", "chain-greeting", "-n", "demo", "--type=merge",
		"-p", `{"data":{"greeting":"salut"}}`); err != nil {
		t.Fatal(err)
	}
	waitFile := func(path, want string) {
		poll(ctx, t, env, 3*time.Minute, func() (bool, string) {
			b, _ := os.ReadFile(path)
			return string(b) == want, fmt.Sprintf("%s holds %q, want %q", path, b, want)
		})
	}
	waitFile(filepath.Join(dir, "producer.txt"), "salut")
	waitFile(filepath.Join(dir, "consumer.txt"), "got salut")
	for _, r := range []resource{producer, consumer} {
		la := waitPhase(ctx, t, env, kc, r, v1alpha1.PhaseApplied, time.Minute)
		if la.Generation != 1 {
			t.Errorf("%s: generation %d, want 1 (the re-render came from the bound data)", r, la.Generation)
		}
	}

	// The ConfigMap goes: a clear condition on the producer.
	if _, err := env.Kubectl(ctx, "", "delete", "configmap", "chain-greeting", "-n", "demo"); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, env, time.Minute, func() (bool, string) {
		la := get(ctx, t, kc, producer)
		for _, c := range la.Status.Conditions {
			if c.Type == v1alpha1.ConditionDependenciesReady && c.Reason == v1alpha1.ReasonBindingSourceNotFound &&
				strings.Contains(c.Message, `ConfigMap "chain-greeting" not found`) {
				return true, ""
			}
		}
		return false, "conditions " + conditions(la)
	})
}
