//go:build integration && providers

package embedded

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/platform/credentials"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/platform/testutil/tofutest"
)

// Versions of hashicorp/kubernetes and hashicorp/helm that
// hack/tools/build-kubernetes-providers.sh builds (`make tools-kubernetes-providers`); both
// are on terraform-plugin-sdk v1 (protocol 5).
const (
	KubernetesProviderVersion = "1.13.4"
	HelmProviderVersion       = "1.3.2"
)

// EnvKubernetesMirror names the filesystem mirror holding both providers.
const EnvKubernetesMirror = "LAVA_KUBERNETES_MIRROR"

// kubeProvider starts an API server with kube-controller-manager (a namespace the kubernetes
// provider deletes must finish terminating: it waits until the namespace is gone) and returns
// the mirror with the provider hashicorp/NAME at version v, the API server and the provider
// credentials: the API server's address, CA and admin token in the variables both providers
// read (KUBE_*). The token is the secret. The configurations set load_config_file = false, so
// neither provider looks for a kubeconfig file (helm 1.3.2 panics on KUBE_LOAD_CONFIG_FILE:
// it reads the variable's string as a bool).
func kubeProvider(t *testing.T, tools tofutest.Tools, name, v string) (string, *kubetest.Env, *credentials.Provider) {
	t.Helper()
	mirror := realMirror(t, tools, EnvKubernetesMirror, "tools-kubernetes-providers",
		"hashicorp/"+name+"/"+v+"/linux_amd64/terraform-provider-"+name+"_v"+v)
	kube := kubetest.StartWithControllers(t)
	if kube.Config.BearerToken == "" {
		t.Fatal("the test API server's kubeconfig has no token")
	}
	creds := &credentials.Provider{Identity: "test", Env: map[string]string{
		"KUBE_HOST":                 kube.Config.Host,
		"KUBE_TOKEN":                kube.Config.BearerToken,
		"KUBE_CLUSTER_CA_CERT_DATA": string(kube.Config.CAData),
	}}
	return mirror, kube, creds
}

// kubeDoc is the Terraform JSON of a kubernetes provider step: a namespace and a ConfigMap in
// it named cm with data k=value and the label app=lava; outside, when not "", is the name of
// a ConfigMap created outside Lava (data k=outside) that the step imports.
func kubeDoc(prefix, cm, value, outside string) map[string]any {
	ns := prefix + "-lava"
	res := map[string]any{
		"kubernetes_namespace": map[string]any{"ns": map[string]any{
			"metadata": []any{map[string]any{"name": ns, "labels": map[string]any{"app": "lava"}}},
		}},
		"kubernetes_config_map": map[string]any{"cm": map[string]any{
			"metadata": []any{map[string]any{"name": cm, "namespace": "${kubernetes_namespace.ns.metadata[0].name}",
				"labels": map[string]any{"app": "lava"}}},
			"data": map[string]any{"k": value},
		}},
	}
	doc := map[string]any{
		"terraform": map[string]any{"required_providers": required("kubernetes", KubernetesProviderVersion)},
		"provider":  map[string]any{"kubernetes": map[string]any{"load_config_file": false}},
		"resource":  res,
	}
	if outside != "" {
		res["kubernetes_config_map"].(map[string]any)["outside"] = map[string]any{
			"metadata": []any{map[string]any{"name": outside, "namespace": "${kubernetes_namespace.ns.metadata[0].name}"}},
			"data":     map[string]any{"k": "outside"},
		}
		doc["import"] = []any{map[string]any{"to": "kubernetes_config_map.outside", "id": ns + "/" + outside}}
	}
	return doc
}

// required is terraform.required_providers with hashicorp/NAME at version v.
func required(name, v string) map[string]any {
	return map[string]any{name: map[string]any{"source": "hashicorp/" + name, "version": v}}
}

func kubeSteps(kube *kubetest.Env) []realStep {
	cfg := func(cm, value string) func(c *realChain) map[string]any {
		return func(c *realChain) map[string]any { return kubeDoc(c.prefix, c.prefix+"-"+cm, value, "") }
	}
	acts := func(ns, cm string) func(*realChain) map[string]string {
		return func(*realChain) map[string]string {
			return map[string]string{"kubernetes_namespace.ns": ns, "kubernetes_config_map.cm": cm}
		}
	}
	// edit changes the ConfigMap prefix-cm2 through the API server.
	edit := func(f func(*corev1.ConfigMap)) func(t *testing.T, c *realChain) {
		return func(t *testing.T, c *realChain) {
			cm := &corev1.ConfigMap{}
			key := client.ObjectKey{Namespace: c.prefix + "-lava", Name: c.prefix + "-cm2"}
			if err := kube.Client.Get(t.Context(), key, cm); err != nil {
				t.Fatal(err)
			}
			f(cm)
			if err := kube.Client.Update(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	withOutside := func(c *realChain) map[string]any { return kubeDoc(c.prefix, c.prefix+"-cm2", "two", c.outside) }
	return []realStep{
		{about: "create", config: cfg("cm", "one"), want: acts("create", "create")},
		{about: "no change", config: cfg("cm", "one"), want: acts("no-op", "no-op")},
		{about: "the data updated in place", config: cfg("cm", "two"), want: acts("no-op", "update")},
		{about: "a new name replaces the ConfigMap", config: cfg("cm2", "two"), want: acts("no-op", "delete,create")},
		{about: "a label changed behind Lava's back", drift: true, severity: engine.SeverityCosmetic, config: cfg("cm2", "two"),
			behind: edit(func(cm *corev1.ConfigMap) { cm.Labels["app"] = "changed" }), want: acts("no-op", "update")},
		{about: "the data changed behind Lava's back", drift: true, severity: engine.SeverityFunctional, config: cfg("cm2", "two"),
			behind: edit(func(cm *corev1.ConfigMap) { cm.Data["k"] = "changed" }), want: acts("no-op", "update")},
		{about: "the ConfigMap deleted behind Lava's back", drift: true, severity: engine.SeverityCritical, config: cfg("cm2", "two"),
			behind: func(t *testing.T, c *realChain) {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.prefix + "-lava", Name: c.prefix + "-cm2"}}
				if err := kube.Client.Delete(t.Context(), cm); err != nil {
					t.Fatal(err)
				}
			},
			want: acts("no-op", "create")},
		{about: "import of a ConfigMap created outside Lava", config: withOutside,
			behind: func(t *testing.T, c *realChain) {
				c.outside = c.prefix + "-outside"
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.prefix + "-lava", Name: c.outside},
					Data: map[string]string{"k": "outside"}}
				if err := kube.Client.Create(t.Context(), cm); err != nil {
					t.Fatal(err)
				}
			},
			want: func(c *realChain) map[string]string {
				return map[string]string{"kubernetes_namespace.ns": "no-op", "kubernetes_config_map.cm": "no-op",
					"kubernetes_config_map.outside": "no-op import=" + c.prefix + "-lava/" + c.outside}
			}},
		{about: "destroy", destroy: true, config: withOutside,
			want: func(*realChain) map[string]string {
				return map[string]string{"kubernetes_namespace.ns": "delete", "kubernetes_config_map.cm": "delete",
					"kubernetes_config_map.outside": "delete"}
			}},
	}
}

// TestKubernetes_tofuOracle runs hashicorp/kubernetes 1.13.4 (terraform-plugin-sdk v1,
// protocol 5) against a real kube-apiserver, etcd and kube-controller-manager on both
// engines, OpenTofu being the oracle, with a namespace and a ConfigMap: create, no change, an
// in-place update of the data, a rename that replaces the ConfigMap, a label changed behind
// Lava's back (cosmetic drift: metadata.0.labels.), its data changed behind Lava's back
// (functional), the ConfigMap deleted behind its back (critical), the import of a ConfigMap
// created outside, destroy (the namespace finishes terminating); each step both ways, as
// [realRun.run] checks them.
//
// The admin's token reaches the provider only through its environment (KUBE_TOKEN of the
// embedded engine's provider credentials, tofu's environment), as a tenant's
// spec.providerEnvFrom gives it; it shows in no state, drift finding or error.
func TestKubernetes_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror, kube, creds := kubeProvider(t, tools, "kubernetes", KubernetesProviderVersion)
	realRun{
		tools: tools, mirror: mirror, required: required("kubernetes", KubernetesProviderVersion), creds: creds,
		secrets: []string{kube.Config.BearerToken},
		steps:   kubeSteps(kube),
		afterEmbedded: func(t *testing.T, c *realChain) {
			err := kube.Client.Get(t.Context(), client.ObjectKey{Name: c.prefix + "-lava"}, &corev1.Namespace{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("the namespace is still there after the destroy: %v", err)
			}
		},
	}.run(t)
}

// helmChart is the absolute path of testdata/charts/configmap: one ConfigMap, named after the
// release, holding .Values.value.
func helmChart(t *testing.T) string {
	t.Helper()
	chart, err := filepath.Abs(filepath.Join("testdata", "charts", "configmap"))
	if err != nil {
		t.Fatal(err)
	}
	return chart
}

// helmDoc is the Terraform JSON of a helm provider step: the release prefix-rel of the chart
// [helmChart] in the namespace default with value; outside, when not "", is a release of the
// same chart installed outside Lava (value "outside") that the step imports.
func helmDoc(t *testing.T, prefix, value, outside string) map[string]any {
	release := func(name, value string) map[string]any {
		return map[string]any{"name": name, "chart": helmChart(t), "namespace": "default", "wait": false,
			"set": []any{map[string]any{"name": "value", "value": value}}}
	}
	rels := map[string]any{"r": release(prefix+"-rel", value)}
	doc := map[string]any{
		"terraform": map[string]any{"required_providers": required("helm", HelmProviderVersion)},
		"provider": map[string]any{"helm": map[string]any{
			"kubernetes": []any{map[string]any{"load_config_file": false}}}},
		"resource": map[string]any{"helm_release": rels},
	}
	if outside != "" {
		rels["outside"] = release(outside, "outside")
		doc["import"] = []any{map[string]any{"to": "helm_release.outside", "id": "default/" + outside}}
	}
	return doc
}

// helmCLI runs the helm command line ($LAVA_HELM_BIN, `make tools-helm`) against kubeconfig,
// failing t when it fails.
func helmCLI(t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	bin := os.Getenv("LAVA_HELM_BIN")
	if fi, err := os.Stat(bin); bin == "" || err != nil || fi.IsDir() {
		t.Fatalf("LAVA_HELM_BIN (%q) is not the helm command line: build it with `make tools-helm` and export LAVA_HELM_BIN", bin)
	}
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
}

// TestHelm_tofuOracle runs hashicorp/helm 1.3.2 (terraform-plugin-sdk v1, protocol 5) against
// a real kube-apiserver on both engines, OpenTofu being the oracle, with a release of a local
// chart holding only a ConfigMap (nothing needs a kubelet): create, no change, an upgrade with
// another value (in place), the release uninstalled behind Lava's back with the helm command
// line (critical drift), the import of a release installed outside with it, destroy; each step
// both ways, as [realRun.run] checks them. The released ConfigMap holds the value each step
// set. The credentials are those of [TestKubernetes_tofuOracle].
func TestHelm_tofuOracle(t *testing.T) {
	tools := tofutest.Tofu(t)
	mirror, kube, creds := kubeProvider(t, tools, "helm", HelmProviderVersion)
	kubeconfig := kube.Kubeconfig(t)
	cfg := func(value string) func(c *realChain) map[string]any {
		return func(c *realChain) map[string]any { return helmDoc(t, c.prefix, value, "") }
	}
	withOutside := func(c *realChain) map[string]any { return helmDoc(t, c.prefix, "two", c.outside) }
	acts := func(a string) func(*realChain) map[string]string {
		return func(*realChain) map[string]string { return map[string]string{"helm_release.r": a} }
	}
	// holds checks, before the next step, the ConfigMap the previous one released.
	holds := func(value string) func(t *testing.T, c *realChain) {
		return func(t *testing.T, c *realChain) {
			cm := &corev1.ConfigMap{}
			if err := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: c.prefix + "-rel"}, cm); err != nil {
				t.Fatalf("the release's ConfigMap: %v", err)
			}
			if cm.Data["value"] != value {
				t.Errorf("the release's ConfigMap holds %q, want %q", cm.Data["value"], value)
			}
		}
	}
	realRun{
		tools: tools, mirror: mirror, required: required("helm", HelmProviderVersion), creds: creds,
		secrets: []string{kube.Config.BearerToken},
		steps: []realStep{
			{about: "create", config: cfg("one"), want: acts("create")},
			{about: "no change", config: cfg("one"), behind: holds("one"), want: acts("no-op")},
			{about: "an upgrade with another value", config: cfg("two"), want: acts("update")},
			{about: "the release uninstalled behind Lava's back", drift: true, severity: engine.SeverityCritical, config: cfg("two"),
				behind: func(t *testing.T, c *realChain) {
					holds("two")(t, c)
					helmCLI(t, kubeconfig, "uninstall", c.prefix+"-rel", "--namespace", "default")
				},
				want: acts("create")},
			{about: "import of a release installed outside Lava", config: withOutside,
				behind: func(t *testing.T, c *realChain) {
					holds("two")(t, c)
					c.outside = c.prefix + "-outside"
					helmCLI(t, kubeconfig, "install", c.outside, helmChart(t), "--namespace", "default", "--set", "value=outside")
				},
				// The provider's importer records the chart's name, not the configured path, nor
				// the set values: the imported release is upgraded in place to the configuration.
				want: func(c *realChain) map[string]string {
					return map[string]string{"helm_release.r": "no-op", "helm_release.outside": "update import=default/" + c.outside}
				}},
			{about: "destroy", destroy: true, config: withOutside, behind: holds("two"),
				want: func(*realChain) map[string]string {
					return map[string]string{"helm_release.r": "delete", "helm_release.outside": "delete"}
				}},
		},
		afterEmbedded: func(t *testing.T, c *realChain) {
			for _, name := range []string{c.prefix + "-rel", c.outside} {
				err := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{})
				if !apierrors.IsNotFound(err) {
					t.Errorf("the ConfigMap of release %s is still there after the destroy: %v", name, err)
				}
			}
		},
	}.run(t)
}
