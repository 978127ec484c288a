//go:build integration

package applier_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lavav1 "github.com/lava-operator/lava/internal/gen/lava/v1"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/service/applier"
)

// TestApplier_outputsSecretNotOwned is the attack of docs/security.md "Kubernetes RBAC": an
// object named so that its outputs Secret name is another Secret's (one not owned at all, one
// owned by another LavaArchitecture) is refused before anything is planned, Failed with reason
// OutputsSecretNotOwned; the Secret keeps its data and nothing is applied.
func TestApplier_outputsSecretNotOwned(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	h := newHarness(t)
	h.startApplier(applierOpts{kube: env.Client})
	owners := map[string][]metav1.OwnerReference{
		"victim": nil,
		"reused": {{APIVersion: "lava.pleme.io/v1alpha1", Kind: "LavaArchitecture", Name: "reused", UID: "uid-of-another-object"}},
	}
	for name, refs := range owners { // not subtests: await reports on the harness's test
		func() {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: applier.OutputsSecretName(name), OwnerReferences: refs},
				Data: map[string][]byte{"app-password": []byte("keep-me")}}
			if err := env.Client.Create(t.Context(), sec); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "applied.txt")
			rendered := `{"resource":{"local_file":{"f":{"filename":"` + marker + `","content":"x"}}},
			  "output":{"token":{"value":"new","sensitive":true}}}`
			h.publishSynthesized(ns, name, 1, rendered, lavav1.Engine_ENGINE_EMBEDDED)
			f := await(h, ns, name, time.Minute, gen[*lavav1.Failed](1))
			if f.GetReason() != applier.ReasonOutputsSecretNotOwned || f.GetStage() != lavav1.Stage_STAGE_PLAN ||
				!strings.Contains(f.GetMessage(), "is not owned by LavaArchitecture "+name) {
				t.Errorf("%s: Failed %s at %s: %q; want OutputsSecretNotOwned at PLAN", name, f.GetReason(), f.GetStage(), f.GetMessage())
			}
			got := &corev1.Secret{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(sec), got); err != nil {
				t.Fatal(err)
			}
			if len(got.Data) != 1 || string(got.Data["app-password"]) != "keep-me" {
				t.Errorf("%s: the Secret was overwritten: %v", name, got.Data)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Errorf("%s: the architecture was applied: %v", name, err)
			}
		}()
	}
}
