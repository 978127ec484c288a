//go:build integration

package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/envflag"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
	"github.com/lava-operator/lava/internal/service/anomaly"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/attest"
	"github.com/lava-operator/lava/internal/service/drift"
	"github.com/lava-operator/lava/internal/service/synth"
	"github.com/lava-operator/lava/internal/service/viggy"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// ciValues turns every option of the chart on.
const ciValues = "ci/all-on-values.yaml"

// helmBin returns $LAVA_HELM_BIN, failing the test when it is not an executable.
func helmBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("LAVA_HELM_BIN")
	if p == "" {
		t.Fatal("LAVA_HELM_BIN is not set: build helm with `make tools-helm` and run through make (or export LAVA_HELM_BIN=$HOME/.cache/lava/tools/helm-v3.22.0/helm)")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("LAVA_HELM_BIN=%s is not an executable file: build it with `make tools-helm` (%v)", p, err)
	}
	return p
}

// kubectlBin returns $KUBEBUILDER_ASSETS/kubectl (the same Kubernetes version as the test API
// server), failing the test when it is missing.
func kubectlBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(kubetest.AssetsEnv)
	if dir == "" {
		t.Fatalf("%s is not set: build kubectl, kube-apiserver and etcd with `make tools-kube`", kubetest.AssetsEnv)
	}
	p := filepath.Join(dir, "kubectl")
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is not an executable file: build it with `make tools-kube` (%v)", p, err)
	}
	return p
}

// helm runs helm with its state directories in a temporary directory and returns stdout; a
// non-zero exit is an error carrying stderr.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), helmBin(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// render runs `helm template lava <chart> --namespace lava-system --include-crds` with extra
// arguments.
func render(t *testing.T, extra ...string) []byte {
	t.Helper()
	out, err := helm(t, append([]string{"template", "lava", chartDir, "--namespace", "lava-system", "--include-crds"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode splits a rendered multi-document YAML stream into objects.
func decode(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode rendered manifests: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func TestHelmLint(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"all-on", []string{"-f", filepath.Join(chartDir, ciValues)}},
		{"one-node-cluster", []string{"-f", "../../hack/cluster/lava-values.yaml"}}, // TestCluster_chart's
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartDir}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !bytes.Contains(out, []byte("0 chart(s) failed")) {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestManifestsUpToDate checks that deploy/manifests/lava.yaml is the default values rendered
// (-update rewrites it).
func TestManifestsUpToDate(t *testing.T) {
	got := render(t)
	want, err := os.ReadFile(manifestFile)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	if *update {
		if err := os.WriteFile(manifestFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("deploy/manifests/lava.yaml is not the fresh render (-committed +render):\n%s\nregenerate: go test -tags integration ./test/chart -run TestManifestsUpToDate -update",
		cmp.Diff(string(want), string(got)))
}

// TestSchemaRejects checks that values.schema.json and the templates refuse bad values, and that
// a good override (scaling one service) renders.
func TestSchemaRejects(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"watcher.replicas=abc", "/watcher/replicas"},
		{"applier.replicas=-1", "/applier/replicas"},
		{"unknownKey=1", "additional properties 'unknownKey'"},
		{"synth.unknownKey=1", "additional properties 'unknownKey'"},
		{"watcher.image.pullPolicy=Sometimes", "/watcher/image/pullPolicy"},
		{"log.level=verbose", "/log/level"},
		{"nats.streamReplicas=0", "/nats/streamReplicas"},
		{"metrics.serviceMonitor.enabled=maybe", "/metrics/serviceMonitor/enabled"},
		{"attest.signingKey.value=not-hex", "/attest/signingKey/value"},
		{"watchNamespaces[0]=Not_A_Namespace", "/watchNamespaces/0"},
		{"attest.signingKey.existingSecret=", "the chart never generates keys"},
		{"synth.bindingsKey.existingSecret=", "synth.bindingsKey: set synth.bindingsKey.existingSecret"},
		{"drift.providerInstall.networkMirror=http://mirror", "/drift/providerInstall/networkMirror"},
		{"applier.providerInstall.cacheDir=relative", "/applier/providerInstall/cacheDir"},
		{"policy.cluster.fileWriteRoots={relative}", "/policy/cluster/fileWriteRoots/0"},
		{"policy.cluster.fileWriteRoots={/var/lib/lava}", "policy.cluster.fileWriteRoots: /var/lib/lava overlaps /var/lib/lava/work"},
		{"policy.namespaces.team-a.fileWriteRoots={/var/lib/lava/providers/x}", "policy.namespaces.team-a.fileWriteRoots: /var/lib/lava/providers/x overlaps /var/lib/lava/providers"},
		{"policy.cluster.fileWriteRoots={/}", "policy.cluster.fileWriteRoots: / overlaps"},
		{"policy.cluster.fileWriteRoots={/tmp}", "policy.cluster.fileWriteRoots: /tmp holds /tmp"},
		{"policy.cluster.fileReadRoots={relative}", "/policy/cluster/fileReadRoots/0"},
		{"policy.namespaces.team-a.fileReadRoots={/etc/lava}", "policy.namespaces.team-a.fileReadRoots: /etc/lava overlaps /etc/lava"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := helm(t, "template", "lava", chartDir, "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want a failure mentioning %q", tc.set, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template --set %s: error does not mention %q:\n%v", tc.set, tc.want, err)
			}
		})
	}
	t.Run("scale applier", func(t *testing.T) {
		objs := decode(t, render(t, "--set", "applier.replicas=5"))
		for _, u := range objs {
			if u.GetKind() == "Deployment" {
				d := convert[appsv1.Deployment](t, u)
				want := int32(1)
				if d.Name == "lava-applier" {
					want = 5
				}
				if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
					t.Errorf("%s replicas = %v, want %d", d.Name, d.Spec.Replicas, want)
				}
			}
		}
	})
}

// grant is one permission a ServiceAccount holds: where ("cluster" or a namespace), the API
// group, the resource and the verb.
type grant struct{ scope, group, resource, verb string }

func (g grant) String() string { return g.scope + " " + g.group + "/" + g.resource + " " + g.verb }

// grants returns, per ServiceAccount name (in namespace lava-system), every permission its
// bindings give it, sorted.
func grants(t *testing.T, objs []*unstructured.Unstructured) map[string][]string {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRole":
			clusterRoles[u.GetName()] = convert[rbacv1.ClusterRole](t, u).Rules
		case "Role":
			roles[u.GetNamespace()+"/"+u.GetName()] = convert[rbacv1.Role](t, u).Rules
		}
	}
	out := map[string][]string{}
	add := func(subjects []rbacv1.Subject, scope string, rules []rbacv1.PolicyRule) {
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != "lava-system" {
				t.Errorf("binding subject %+v is not a ServiceAccount of lava-system", s)
				continue
			}
			for _, r := range rules {
				if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
					t.Errorf("unexpected rule %+v", r)
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out[s.Name] = append(out[s.Name], grant{scope, g, res, v}.String())
						}
					}
				}
			}
		}
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRoleBinding":
			b := convert[rbacv1.ClusterRoleBinding](t, u)
			rules, ok := clusterRoles[b.RoleRef.Name]
			if b.RoleRef.Kind != "ClusterRole" || !ok {
				t.Errorf("ClusterRoleBinding %s refers to %s %s, not rendered", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			add(b.Subjects, "cluster", rules)
		case "RoleBinding":
			b := convert[rbacv1.RoleBinding](t, u)
			rules, ok := roles[b.Namespace+"/"+b.RoleRef.Name]
			if b.RoleRef.Kind != "Role" || !ok {
				t.Errorf("RoleBinding %s/%s refers to %s %s, not rendered in its namespace", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
			add(b.Subjects, b.Namespace, rules)
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// expectedGrants is docs/architecture.md section 2's table, in the given scopes (namespaces that hold
// LavaArchitectures, or "cluster"), with the leader-election Role in lava-system. synth and the
// applier impersonate ServiceAccounts (docs/security.md, "Kubernetes RBAC"), and so does the
// watcher to read bound Secrets (watcher.readSecrets); ownAccess adds their own ConfigMap and
// Secret access (tenancy.allowOwnIdentity; the watcher's: get on secrets); (the all-on values also set
// providerCredentials.tokenAudience: the applier and drift may read ServiceAccounts and request
// their tokens, docs/security.md "Engines"). drift impersonates ServiceAccounts for
// spec.providerEnvFrom as the applier does, and reads only Secrets with its own access.
func expectedGrants(prefix string, scopes []string, ownAccess bool) map[string][]string {
	per := map[string][]grant{
		"watcher": {
			{"", "lava.pleme.io", "lavaarchitectures", "get"}, {"", "lava.pleme.io", "lavaarchitectures", "list"},
			{"", "lava.pleme.io", "lavaarchitectures", "watch"}, {"", "lava.pleme.io", "lavaarchitectures", "patch"},
			{"", "lava.pleme.io", "lavaarchitectures", "update"},
			{"", "lava.pleme.io", "lavaarchitectures/status", "get"}, {"", "lava.pleme.io", "lavaarchitectures/status", "patch"},
			{"", "lava.pleme.io", "lavaarchitectures/status", "update"},
			{"", "lava.pleme.io", "lavaarchitectures/finalizers", "update"},
			{"", "lava.pleme.io", "remediationpolicies", "get"}, {"", "lava.pleme.io", "remediationpolicies", "list"},
			{"", "lava.pleme.io", "remediationpolicies", "watch"},
			{"", "lava.pleme.io", "lavaarchitecturedependencies", "get"}, {"", "lava.pleme.io", "lavaarchitecturedependencies", "list"},
			{"", "lava.pleme.io", "lavaarchitecturedependencies", "watch"},
			{"", "source.toolkit.fluxcd.io", "gitrepositories", "get"}, {"", "source.toolkit.fluxcd.io", "gitrepositories", "list"},
			{"", "source.toolkit.fluxcd.io", "gitrepositories", "watch"},
			{"", "source.toolkit.fluxcd.io", "ocirepositories", "get"}, {"", "source.toolkit.fluxcd.io", "ocirepositories", "list"},
			{"", "source.toolkit.fluxcd.io", "ocirepositories", "watch"},
			{"", "source.toolkit.fluxcd.io", "buckets", "get"}, {"", "source.toolkit.fluxcd.io", "buckets", "list"},
			{"", "source.toolkit.fluxcd.io", "buckets", "watch"},
			{"", "events.k8s.io", "events", "create"}, {"", "events.k8s.io", "events", "patch"},
			{"", "", "configmaps", "get"}, {"", "", "configmaps", "list"}, {"", "", "configmaps", "watch"},
			{"", "", "serviceaccounts", "impersonate"},
		},
		"synth":   {{"", "", "serviceaccounts", "impersonate"}, {"", "lava.pleme.io", "lavaarchitectures", "get"}},
		"applier": {{"", "", "serviceaccounts", "impersonate"}, {"", "lava.pleme.io", "lavaarchitectures", "get"}},
		"drift":   {{"", "", "serviceaccounts", "impersonate"}},
		"anomaly": {{"", "events.k8s.io", "events", "create"}, {"", "events.k8s.io", "events", "patch"}},
	}
	if ownAccess {
		per["watcher"] = append(per["watcher"], grant{"", "", "secrets", "get"})
		per["synth"] = append(per["synth"], grant{"", "", "configmaps", "get"}, grant{"", "", "secrets", "get"})
		per["applier"] = append(per["applier"], grant{"", "", "configmaps", "get"}, grant{"", "", "secrets", "get"}, grant{"", "", "secrets", "create"}, grant{"", "", "secrets", "update"},
			grant{"", "", "serviceaccounts", "get"}, grant{"", "", "serviceaccounts/token", "create"})
		per["drift"] = append(per["drift"], grant{"", "", "secrets", "get"},
			grant{"", "", "serviceaccounts", "get"}, grant{"", "", "serviceaccounts/token", "create"})
	}
	out := map[string][]string{}
	for svc, gs := range per {
		name := prefix + "-" + svc
		for _, scope := range scopes {
			for _, g := range gs {
				g.scope = scope
				out[name] = append(out[name], g.String())
			}
		}
	}
	for _, v := range []string{"get", "list", "watch", "create", "update", "patch"} {
		out[prefix+"-watcher"] = append(out[prefix+"-watcher"], grant{"lava-system", "coordination.k8s.io", "leases", v}.String())
	}
	// The RPC services ask the API server to review callers' tokens and access
	// (docs/security.md, "RPCs"), cluster-wide whatever watchNamespaces says.
	for _, svc := range rpcServices {
		out[prefix+"-"+svc] = append(out[prefix+"-"+svc], grant{"cluster", "authentication.k8s.io", "tokenreviews", "create"}.String(),
			grant{"cluster", "authorization.k8s.io", "subjectaccessreviews", "create"}.String())
	}
	for _, v := range []string{"create", "patch"} {
		out[prefix+"-watcher"] = append(out[prefix+"-watcher"], grant{"lava-system", "", "events", v}.String())
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// rpcServices serve a connect API on 8080 (RenderService, PlanService, ReceiptService) and ask
// the API server to review their callers (docs/security.md, "RPCs").
var rpcServices = []string{"synth", "applier", "attest"}

// serviceOptions are the options types the service binaries parse (services/<svc>/main.go:
// svc.Command(name, <svc>.Run)).
var serviceOptions = map[string]func() svc.Options{
	bus.ServiceWatcher: func() svc.Options { return &watcher.Options{} },
	bus.ServiceSynth:   func() svc.Options { return &synth.Options{} },
	bus.ServiceApplier: func() svc.Options { return &applier.Options{} },
	bus.ServiceDrift:   func() svc.Options { return &drift.Options{} },
	bus.ServiceViggy:   func() svc.Options { return &viggy.Options{} },
	bus.ServiceAnomaly: func() svc.Options { return &anomaly.Options{} },
	bus.ServiceAttest:  func() svc.Options { return &attest.Options{} },
}

// flagEnvNames returns the LAVA_* variable of every flag of service svc's binary
// (internal/platform/envflag: LAVA_ + upper case, dashes as underscores): the flag set
// svc.Command parses, built by svc.NewFlagSet from the service's options type.
func flagEnvNames(t *testing.T, name string) map[string]bool {
	t.Helper()
	opts, ok := serviceOptions[name]
	if !ok {
		t.Fatalf("no options type for service %s", name)
	}
	out := map[string]bool{}
	svc.NewFlagSet(name, opts()).VisitAll(func(f *pflag.Flag) { out[envflag.VarName("LAVA", f.Name)] = true })
	if len(out) < 5 {
		t.Fatalf("service %s: found only %d flags", name, len(out))
	}
	return out
}

// TestRenderedObjects checks the rendered default and all-on manifests: RBAC exactly as docs/architecture.md
// section 2 (attest, drift and viggy bound to nothing, no token mounted), every LAVA_* variable
// a flag of its service, probes, security contexts, Services and the key mounts.
func TestRenderedObjects(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		args         []string
		scopes       []string
		ownAccess    bool
	}{
		{"default", "lava", nil, []string{"lava-system"}, false},
		{"cluster-wide", "lava", []string{"--set", "clusterWide=true"}, []string{"cluster"}, false},
		{"all-on", "lava-all", []string{"-f", filepath.Join(chartDir, ciValues)}, []string{"team-a", "team-b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decode(t, render(t, tc.args...))
			if d := cmp.Diff(expectedGrants(tc.prefix, tc.scopes, tc.ownAccess), grants(t, objs)); d != "" {
				t.Errorf("RBAC differs from docs/architecture.md section 2 (-want +got):\n%s", d)
			}
			kinds := map[string]int{}
			deployments := map[string]*appsv1.Deployment{}
			policies := map[string]*networkingv1.NetworkPolicy{}
			sas := map[string]*corev1.ServiceAccount{}
			svcs := map[string]*corev1.Service{}
			for _, u := range objs {
				kinds[u.GetKind()]++
				switch u.GetKind() {
				case "Deployment":
					deployments[u.GetName()] = convert[appsv1.Deployment](t, u)
				case "NetworkPolicy":
					policies[u.GetName()] = convert[networkingv1.NetworkPolicy](t, u)
				case "ServiceAccount":
					sas[u.GetName()] = convert[corev1.ServiceAccount](t, u)
				case "Service":
					svcs[u.GetName()] = convert[corev1.Service](t, u)
				}
			}
			if kinds["CustomResourceDefinition"] != 3 || kinds["Deployment"] != 7 || kinds["ServiceAccount"] != 7 || kinds["Service"] != 7 {
				t.Errorf("rendered kinds = %v", kinds)
			}
			// Ingress only to each service's ports (docs/security.md): connect for the RPC
			// services, metrics and health for all.
			for _, svc := range services {
				np := policies[tc.prefix+"-"+svc]
				if np == nil {
					t.Errorf("%s: no NetworkPolicy", svc)
					continue
				}
				want := []int32{9090, 9091}
				if slices.Contains(rpcServices, svc) {
					want = []int32{8080, 9090, 9091}
				}
				var got []int32
				for _, r := range np.Spec.Ingress {
					for _, p := range r.Ports {
						got = append(got, p.Port.IntVal)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) ||
					np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != svc {
					t.Errorf("%s: NetworkPolicy admits ports %v (types %v, selector %v), want %v", svc, got, np.Spec.PolicyTypes,
						np.Spec.PodSelector.MatchLabels, want)
				}
			}
			checkMonitoring(t, tc.name == "all-on", objs)
			for _, svc := range services {
				name := tc.prefix + "-" + svc
				d, sa, s := deployments[name], sas[name], svcs[name]
				if d == nil || sa == nil || s == nil {
					t.Errorf("%s: Deployment %v, ServiceAccount %v, Service %v", name, d != nil, sa != nil, s != nil)
					continue
				}
				noKube := slices.Contains([]string{"viggy"}, svc)
				pod := d.Spec.Template.Spec
				if pod.ServiceAccountName != name {
					t.Errorf("%s: serviceAccountName %q", name, pod.ServiceAccountName)
				}
				if noKube && (pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken ||
					sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
					t.Errorf("%s: the ServiceAccount token is mounted; it never calls the Kubernetes API", name)
				}
				if ps := pod.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
					t.Errorf("%s: pod securityContext %+v", name, ps)
				}
				if len(pod.Containers) != 1 {
					t.Fatalf("%s: %d containers", name, len(pod.Containers))
				}
				c := pod.Containers[0]
				sc := c.SecurityContext
				if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
					sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
					!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
					t.Errorf("%s: container securityContext %+v", name, sc)
				}
				if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "health" {
					t.Errorf("%s: liveness probe %+v", name, p)
				}
				if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "health" {
					t.Errorf("%s: readiness probe %+v", name, p)
				}
				ports := map[string]int32{}
				for _, p := range c.Ports {
					ports[p.Name] = p.ContainerPort
				}
				wantPorts := map[string]int32{"metrics": 9090, "health": 9091}
				if slices.Contains(rpcServices, svc) {
					wantPorts["connect"] = 8080
				}
				if d := cmp.Diff(wantPorts, ports); d != "" {
					t.Errorf("%s: container ports (-want +got):\n%s", name, d)
				}
				var svcPorts []string
				for _, p := range s.Spec.Ports {
					svcPorts = append(svcPorts, p.Name+">"+p.TargetPort.String())
				}
				wantSvc := []string{"metrics>metrics"}
				if _, ok := wantPorts["connect"]; ok {
					wantSvc = append(wantSvc, "connect>connect")
				}
				if !slices.Equal(svcPorts, wantSvc) {
					t.Errorf("%s: Service ports %v, want %v", name, svcPorts, wantSvc)
				}
				flags := flagEnvNames(t, svc)
				env := map[string]corev1.EnvVar{}
				for _, e := range c.Env {
					env[e.Name] = e
					if strings.HasPrefix(e.Name, "LAVA_") && !flags[e.Name] {
						t.Errorf("%s: %s names no flag of services/%s (it would be ignored)", name, e.Name, svc)
					}
				}
				if _, ok := env["LAVA_NATS_URL"]; !ok {
					t.Errorf("%s: no LAVA_NATS_URL", name)
				}
				if tc.name != "all-on" {
					checkLockdown(t, name, svc, env)
				}
				if tc.name == "all-on" {
					for _, v := range []string{"LAVA_NATS_CREDS", "LAVA_CONCURRENCY", "SSL_CERT_DIR"} {
						if _, ok := env[v]; !ok && !(v == "LAVA_CONCURRENCY" && svc == "watcher") {
							t.Errorf("%s: all-on values but no %s", name, v)
						}
					}
					if e := env["LAVA_NATS_URL"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "lava-nats-url" {
						t.Errorf("%s: LAVA_NATS_URL %+v, want from Secret lava-nats-url", name, e)
					}
				}
				// fileVolume: the all-on values' claim, read-write in the applier, read-only in drift.
				if svc == "applier" || svc == "drift" {
					var mount *corev1.VolumeMount
					for i, m := range c.VolumeMounts {
						if m.Name == "files" {
							mount = &c.VolumeMounts[i]
						}
					}
					var claim string
					for _, v := range pod.Volumes {
						if v.Name == "files" && v.PersistentVolumeClaim != nil {
							claim = v.PersistentVolumeClaim.ClaimName
						}
					}
					switch {
					case tc.name != "all-on" && (mount != nil || claim != ""):
						t.Errorf("%s: a files volume without fileVolume.source", name)
					case tc.name == "all-on" && (mount == nil || mount.MountPath != "/var/lib/lava-files" || mount.ReadOnly != (svc == "drift") || claim != "lava-files"):
						t.Errorf("%s: files mount %+v of claim %q, want lava-files at /var/lib/lava-files (read-only in drift only)", name, mount, claim)
					}
				}
				mountFile := map[string]string{"synth": "LAVA_BINDINGS_KEY_FILE", "attest": "LAVA_SIGNING_KEY_FILE"}
				if v, ok := mountFile[svc]; ok {
					path := env[v].Value
					var mounted bool
					for _, m := range c.VolumeMounts {
						if m.ReadOnly && strings.HasPrefix(path, m.MountPath+"/") {
							mounted = true
						}
					}
					if !mounted {
						t.Errorf("%s: %s=%q is not in a read-only mount", name, v, path)
					}
				}
			}
		})
	}
}

// lockdownFlags are the flags of the tenancy lockdown per service (docs/design/0026): the
// chart's defaults set each of them to the service's own flag default, which is the lockdown,
// also lava up's.
var lockdownFlags = map[string][]string{
	bus.ServiceWatcher: {"allow-cross-namespace-refs"},
	bus.ServiceSynth:   {"impersonate", "default-service-account", "allow-own-identity"},
	bus.ServiceApplier: {"impersonate", "default-service-account", "allow-own-identity"},
	bus.ServiceDrift:   {"impersonate", "default-service-account", "allow-own-identity"},
}

// checkLockdown fails unless env (the container of service svc rendered with the chart's
// default values) sets every lockdown flag of svc to the flag's default, and those defaults
// are the lockdown: impersonation on, cross-namespace references refused.
func checkLockdown(t *testing.T, name, svcName string, env map[string]corev1.EnvVar) {
	t.Helper()
	fs := svc.NewFlagSet(svcName, serviceOptions[svcName]())
	for _, f := range lockdownFlags[svcName] {
		fl := fs.Lookup(f)
		if fl == nil {
			t.Errorf("%s: services/%s has no --%s", name, svcName, f)
			continue
		}
		v := envflag.VarName("LAVA", f)
		if e, ok := env[v]; !ok || e.Value != fl.DefValue {
			t.Errorf("%s: %s = %q (set %v), want the flag's default %q", name, v, e.Value, ok, fl.DefValue)
		}
	}
	locked := map[string]string{"impersonate": "true", "allow-own-identity": "false", "allow-cross-namespace-refs": "false"}
	for _, f := range lockdownFlags[svcName] {
		if want, ok := locked[f]; ok && fs.Lookup(f) != nil && fs.Lookup(f).DefValue != want {
			t.Errorf("services/%s: --%s defaults to %s, want %s (the lockdown)", svcName, f, fs.Lookup(f).DefValue, want)
		}
	}
}

// writeKubeconfig writes a kubeconfig reaching the API server of cfg and returns its path.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApplyToAPIServer applies the rendered manifests to a real kube-apiserver (envtest):
// server-side dry-run for the default and the all-on values, then the default for real, and
// asks the API server what each ServiceAccount may do (SubjectAccessReview).
func TestApplyToAPIServer(t *testing.T) {
	kubectl := kubectlBin(t)
	env := kubetest.Start(t)
	kubeconfig := writeKubeconfig(t, env.Config)
	run := func(t *testing.T, stdin []byte, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, ns := range []string{"lava-system", "team-a", "team-b", "infra"} {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The ServiceMonitor of the all-on values needs the Prometheus Operator's CRD: a minimal
	// copy (group, kind, version, an open schema) stands in for it.
	smCRD, err := os.ReadFile("testdata/servicemonitor-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run(t, smCRD, "apply", "--server-side", "--field-manager=lava-chart-test", "-f", "-")
	run(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
	prCRD, err := os.ReadFile("testdata/prometheusrule-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run(t, prCRD, "apply", "--server-side", "--field-manager=lava-chart-test", "-f", "-")
	run(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/prometheusrules.monitoring.coreos.com")

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"all-on", []string{"-f", filepath.Join(chartDir, ciValues)}},
	} {
		t.Run("dry-run "+tc.name, func(t *testing.T) {
			manifests := render(t, tc.args...)
			n := len(decode(t, manifests))
			out := run(t, manifests, "apply", "--server-side", "--dry-run=server", "--field-manager=lava-chart-test", "-f", "-")
			if got := strings.Count(out, "(server dry run)"); got != n {
				t.Fatalf("%d of %d objects applied with server dry run:\n%s", got, n, out)
			}
		})
	}

	// As an operator would: helm install (another release name, so its cluster-scoped names do
	// not collide with the kubectl-applied default below; the CRDs exist already), then scale
	// one service with helm upgrade.
	t.Run("helm install and scale", func(t *testing.T) {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lava-helm"}}); err != nil {
			t.Fatal(err)
		}
		// --no-hooks: this API server has no nodes, so the bootstrap hook Job would never finish
		// (the dry-run subtests above apply the Job; TestBootstrapJob checks it).
		out, err := helm(t, "install", "lava2", chartDir, "--namespace", "lava-helm", "--kubeconfig", kubeconfig, "--no-hooks")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"STATUS: deployed", "watching lava-helm.", "lava-attest-signing-key"} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("helm install output lacks %q:\n%s", want, out)
			}
		}
		if out, err = helm(t, "upgrade", "lava2", chartDir, "--namespace", "lava-helm", "--kubeconfig", kubeconfig,
			"--reuse-values", "--set", "applier.replicas=3", "--no-hooks"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, svc := range services {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "lava-helm", Name: "lava2-" + svc}, d); err != nil {
				t.Fatal(err)
			}
			want := int32(1)
			if svc == "applier" {
				want = 3
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
				t.Errorf("after helm upgrade: %s replicas %v, want %d", d.Name, d.Spec.Replicas, want)
			}
		}
	})

	t.Run("apply default and review access", func(t *testing.T) {
		manifests, err := os.ReadFile(manifestFile)
		if err != nil {
			t.Fatal(err)
		}
		run(t, manifests, "apply", "--server-side", "--field-manager=lava-chart-test", "-f", "-")
		for _, tc := range []struct {
			sa, ns, group, resource, sub, verb string
			allowed                            bool
		}{
			{"watcher", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "watch", true},
			{"watcher", "lava-system", "lava.pleme.io", "lavaarchitectures", "status", "patch", true},
			{"watcher", "lava-system", "lava.pleme.io", "lavaarchitectures", "finalizers", "update", true},
			{"watcher", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "delete", false},
			{"watcher", "lava-system", "lava.pleme.io", "remediationpolicies", "", "list", true},
			{"watcher", "lava-system", "lava.pleme.io", "remediationpolicies", "", "update", false},
			{"watcher", "lava-system", "events.k8s.io", "events", "", "create", true},
			{"watcher", "lava-system", "coordination.k8s.io", "leases", "", "update", true},
			{"watcher", "lava-system", "", "secrets", "", "get", false},
			{"synth", "lava-system", "", "secrets", "", "get", false},
			{"synth", "lava-system", "", "configmaps", "", "get", false},
			{"synth", "lava-system", "", "serviceaccounts", "", "impersonate", true},
			{"synth", "lava-system", "", "secrets", "", "list", false},
			{"synth", "lava-system", "", "secrets", "", "create", false},
			{"synth", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "get", true},
			{"synth", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "update", false},
			{"applier", "lava-system", "", "secrets", "", "create", false},
			{"applier", "lava-system", "", "secrets", "", "update", false},
			{"applier", "lava-system", "", "serviceaccounts", "", "impersonate", true},
			{"applier", "lava-system", "", "secrets", "", "delete", false},
			{"applier", "lava-system", "", "secrets", "", "list", false},
			{"applier", "lava-system", "", "configmaps", "", "get", false},
			{"applier", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "get", true},
			{"applier", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "update", false},
			{"anomaly", "lava-system", "events.k8s.io", "events", "", "create", true},
			{"anomaly", "lava-system", "", "secrets", "", "get", false},
			{"attest", "lava-system", "", "secrets", "", "get", false},
			{"drift", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "get", false},
			{"drift", "lava-system", "", "serviceaccounts", "", "impersonate", true},
			{"drift", "lava-system", "", "secrets", "", "get", false},
			{"drift", "lava-system", "", "secrets", "", "create", false},
			{"drift", "lava-system", "", "serviceaccounts", "token", "create", false},
			{"viggy", "lava-system", "lava.pleme.io", "lavaarchitectures", "", "get", false},
			{"viggy", "lava-system", "events.k8s.io", "events", "", "create", false},
			// The default install watches only its own namespace: nothing reaches another.
			{"watcher", "infra", "lava.pleme.io", "lavaarchitectures", "", "watch", false},
			{"watcher", "infra", "coordination.k8s.io", "leases", "", "update", false},
			{"synth", "infra", "", "serviceaccounts", "", "impersonate", false},
			{"applier", "infra", "", "serviceaccounts", "", "impersonate", false},
			{"drift", "infra", "", "serviceaccounts", "", "impersonate", false},
		} {
			user := "system:serviceaccount:lava-system:lava-" + tc.sa
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:lava-system", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: tc.ns, Group: tc.group, Resource: tc.resource, Subresource: tc.sub, Verb: tc.verb,
				},
			}}
			if err := env.Client.Create(t.Context(), sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != tc.allowed {
				t.Errorf("%s %s %s/%s/%s in %s: allowed=%v, want %v (%s)", tc.sa, tc.verb, tc.group, tc.resource, tc.sub, tc.ns,
					sar.Status.Allowed, tc.allowed, sar.Status.Reason)
			}
		}
	})
}

// checkMonitoring checks the PrometheusRule and the Grafana dashboard ConfigMap: absent by
// default; with them on, the rule groups are files/alerts.yaml's and the dashboard is
// files/dashboard.json, in the ConfigMap namespace and with the sidecar label of the values.
func checkMonitoring(t *testing.T, on bool, objs []*unstructured.Unstructured) {
	t.Helper()
	var rule, dash *unstructured.Unstructured
	for _, u := range objs {
		switch {
		case u.GetKind() == "PrometheusRule":
			rule = u
		case u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "-dashboard"):
			dash = u
		}
	}
	if !on {
		if rule != nil || dash != nil {
			t.Errorf("default values render a PrometheusRule (%v) or a dashboard (%v)", rule != nil, dash != nil)
		}
		return
	}
	if rule == nil || dash == nil {
		t.Fatalf("all-on values: PrometheusRule %v, dashboard ConfigMap %v", rule != nil, dash != nil)
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want["groups"], rule.Object["spec"].(map[string]any)["groups"]); d != "" {
		t.Errorf("PrometheusRule groups differ from files/alerts.yaml (-file +rendered):\n%s", d)
	}
	if rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack the values' release label", rule.GetLabels())
	}
	b, err = os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedStringMap(dash.Object, "data")
	if strings.TrimSpace(data["lava.json"]) != strings.TrimSpace(string(b)) {
		t.Errorf("dashboard ConfigMap lava.json differs from files/dashboard.json")
	}
	if dash.GetNamespace() != "infra" || dash.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap in %q with labels %v, want infra and grafana_dashboard=1", dash.GetNamespace(), dash.GetLabels())
	}
}

// TestBootstrapJob: the chart runs `lava nats bootstrap` as a pre-install/pre-upgrade hook Job
// (docs/install.md, docs/security.md "Bus"): from the lava CLI image, with the stream replica
// count, the bootstrap identity's nkey seed from its own Secret and the services' URL,
// credentials and TLS; without the Kubernetes API; every LAVA_* variable it sets is one the CLI
// reads. With inline credentials (nats.creds) their Secret is a hook of a lower weight, so it
// exists when the Job starts. bootstrap.enabled=false renders no Job.
func TestBootstrapJob(t *testing.T) {
	cliEnv := map[string]bool{bus.EnvNATSURL: true, bus.EnvNATSCreds: true, bus.EnvNATSNKey: true,
		bus.EnvNATSCA: true, bus.EnvNATSCert: true, bus.EnvNATSKey: true}
	for _, tc := range []struct {
		name, prefix string
		args         []string
		replicas     string
		allOn        bool
	}{
		{"default", "lava", nil, "1", false},
		{"all-on", "lava-all", []string{"-f", filepath.Join(chartDir, ciValues)}, "3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []*unstructured.Unstructured
			var credsSecret *unstructured.Unstructured
			for _, u := range decode(t, render(t, tc.args...)) {
				switch {
				case u.GetKind() == "Job":
					jobs = append(jobs, u)
				case u.GetKind() == "Secret" && u.GetName() == tc.prefix+"-nats-creds":
					credsSecret = u
				}
			}
			if len(jobs) != 1 || jobs[0].GetName() != tc.prefix+"-bootstrap" {
				t.Fatalf("jobs %v, want one %s-bootstrap", jobs, tc.prefix)
			}
			ann := jobs[0].GetAnnotations()
			if ann["helm.sh/hook"] != "pre-install,pre-upgrade" || !strings.Contains(ann["helm.sh/hook-delete-policy"], "before-hook-creation") {
				t.Errorf("Job annotations %v: not a pre-install,pre-upgrade hook", ann)
			}
			job := convert[batchv1.Job](t, jobs[0])
			pod := job.Spec.Template.Spec
			if pod.RestartPolicy != corev1.RestartPolicyNever || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("pod restartPolicy %q, automountServiceAccountToken %v", pod.RestartPolicy, pod.AutomountServiceAccountToken)
			}
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			if !strings.Contains(c.Image, "/lava:") && !strings.HasSuffix(strings.Split(c.Image, ":")[0], "/lava") {
				t.Errorf("image %q is not the lava CLI image", c.Image)
			}
			if len(c.Args) < 3 || c.Args[0] != "nats" || c.Args[1] != "bootstrap" || !slices.Contains(c.Args, "--replicas="+tc.replicas) {
				t.Errorf("args %v, want nats bootstrap --replicas=%s", c.Args, tc.replicas)
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("container securityContext %+v", sc)
			}
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
				if strings.HasPrefix(e.Name, "LAVA_") && !cliEnv[e.Name] {
					t.Errorf("%s is read by no flag of lava nats bootstrap", e.Name)
				}
			}
			if _, ok := env[bus.EnvNATSURL]; !ok {
				t.Error("no LAVA_NATS_URL")
			}
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m.MountPath
			}
			secrets := map[string]string{}
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					secrets[v.Name] = v.Secret.SecretName
				}
			}
			if !tc.allOn {
				if _, ok := env[bus.EnvNATSNKey]; ok || len(secrets) != 0 {
					t.Errorf("default values: nkey env %v, secret volumes %v", env[bus.EnvNATSNKey], secrets)
				}
				return
			}
			want := map[string]string{"nats-nkey": "lava-all-nats-bootstrap", "nats-creds": "lava-all-nats-creds", "nats-tls": "nats-ca", "nats-client": "nats-client"}
			if d := cmp.Diff(want, secrets); d != "" {
				t.Errorf("Secret volumes (-want +got):\n%s", d)
			}
			for name, v := range map[string]string{"nats-nkey": bus.EnvNATSNKey, "nats-creds": bus.EnvNATSCreds, "nats-tls": bus.EnvNATSCA, "nats-client": bus.EnvNATSCert} {
				if p := env[v].Value; mounts[name] == "" || !strings.HasPrefix(p, mounts[name]+"/") {
					t.Errorf("%s=%q is not in the mount of %s (%q)", v, p, name, mounts[name])
				}
			}
			if credsSecret == nil || credsSecret.GetAnnotations()["helm.sh/hook"] != "pre-install,pre-upgrade" || credsSecret.GetAnnotations()["helm.sh/hook-weight"] != "-5" {
				t.Errorf("the inline credentials Secret is not a hook before the Job: %v", credsSecret)
			}
		})
	}
	for _, u := range decode(t, render(t, "--set", "bootstrap.enabled=false")) {
		if u.GetKind() == "Job" {
			t.Errorf("bootstrap.enabled=false rendered Job %s", u.GetName())
		}
	}
}
