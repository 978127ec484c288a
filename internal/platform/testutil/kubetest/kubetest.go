package kubetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/config/crd"
	"github.com/lava-operator/lava/internal/platform/kube"
)

// AssetsEnv is the environment variable naming the directory with kube-apiserver and etcd.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Env is a running API server with Lava's CRDs installed.
type Env struct {
	// Config reaches the API server as a system:masters user.
	Config *rest.Config
	// Client is a controller-runtime client (no cache) using Scheme.
	Client client.Client
	// Scheme holds the client-go built-in types, apiextensions/v1 and lava.pleme.io/v1alpha1.
	Scheme *runtime.Scheme
	// CRDs are the installed CustomResourceDefinitions, as the API server returned them.
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

// NewScheme returns Lava's scheme (kube.NewScheme) with apiextensions.k8s.io/v1 added, for
// tests that install CRDs.
func NewScheme() (*runtime.Scheme, error) {
	s, err := kube.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("kubetest: build scheme: %w", err)
	}
	return s, nil
}

// CRDs decodes the CRDs embedded by package config/crd (the committed controller-gen output).
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for i, doc := range crd.All() {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, c); err != nil {
			return nil, fmt.Errorf("kubetest: decode embedded CRD %d: %w", i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kubetest: no CRDs embedded in config/crd")
	}
	return out, nil
}

// Start starts etcd and kube-apiserver from $KUBEBUILDER_ASSETS, installs Lava's CRDs (and
// waits until they are established) and stops everything on t.Cleanup. It fails the test when
// the binaries are missing or the control plane does not come up. Each call starts its own
// control plane (about 5 s), so start one per test binary or per top-level test and share it
// through subtests.
func Start(t testing.TB) *Env {
	t.Helper()
	assets, err := Assets()
	if err != nil {
		t.Fatal(err)
	}
	crds, scheme := crdsAndScheme(t)
	etcd, apiserver, err := deathsigWrappers(t.TempDir(), assets)
	if err != nil {
		t.Fatal(err)
	}
	useExisting := false
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		UseExistingCluster:       &useExisting,
		Scheme:                   scheme,
		CRDInstallOptions:        envtest.CRDInstallOptions{CRDs: crds, Scheme: scheme},
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	// kube-apiserver 1.37 refuses a loopback advertise address with the default endpoint
	// reconciler (hack/tools/README.md).
	te.ControlPlane.GetAPIServer().Configure().Set("endpoint-reconciler-type", "none")
	te.ControlPlane.Etcd = &envtest.Etcd{Path: etcd, StartTimeout: te.ControlPlaneStartTimeout, StopTimeout: te.ControlPlaneStopTimeout}
	te.ControlPlane.GetAPIServer().Path = apiserver

	cfg, err := te.Start()
	if err != nil {
		// Start may have launched etcd before the API server failed.
		_ = te.Stop()
		t.Fatalf("kubetest: start envtest (kube-apiserver and etcd from %s=%s; rebuild with `make tools-kube`): %v", AssetsEnv, assets, err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("kubetest: stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("kubetest: client: %v", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, CRDs: te.CRDs}
}

// crdsAndScheme are Lava's CRDs and the scheme the clients use; a failure fails t.
func crdsAndScheme(t testing.TB) ([]*apiextensionsv1.CustomResourceDefinition, *runtime.Scheme) {
	t.Helper()
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	return crds, scheme
}

// deathsigWrappers writes, into dir, an etcd and a kube-apiserver that exec the binaries of
// assets under `setpriv --pdeathsig KILL` (util-linux): envtest starts them with its own
// exec.Cmd (no SysProcAttr hook), and the parent-death signal makes them die with the test
// process, even when that is killed by a timeout (TestNoChildOutlivesAKilledTest). It returns
// the two paths; the error names what is missing.
func deathsigWrappers(dir, assets string) (etcd, apiserver string, err error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", "", fmt.Errorf("kubetest: setpriv (util-linux) is needed to tie etcd and kube-apiserver to the test process: %w", err)
	}
	var out []string
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		p := filepath.Join(dir, bin)
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(filepath.Join(assets, bin)))
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			return "", "", fmt.Errorf("kubetest: %w", err)
		}
		out = append(out, p)
	}
	return out[0], out[1], nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Assets returns $KUBEBUILDER_ASSETS after checking that it holds executable kube-apiserver and
// etcd binaries; the error names `make tools-kube`.
func Assets() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("kubetest: %s is not set: build kube-apiserver and etcd with `make tools-kube` and run the tests through make (or export %s=$HOME/.cache/lava/tools/kube-v1.37.2)", AssetsEnv, AssetsEnv)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		p := filepath.Join(dir, bin)
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("kubetest: %s missing (%s=%s): build it with `make tools-kube`: %w", bin, AssetsEnv, dir, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("kubetest: %s is not an executable file: rebuild with `make tools-kube`", p)
		}
	}
	return dir, nil
}

// Namespace creates a namespace with a fresh random name (prefix "test-") and returns its
// name. Namespaces are not deleted: envtest has no namespace controller to finish the job.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("kubetest: random namespace name: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + hex.EncodeToString(b[:])}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// ServiceAccountToken creates the ServiceAccount name in ns, binds it to verbs on
// lavaarchitectures there (none: no binding) and returns a token the API server issued for it
// (TokenRequest).
func (e *Env) ServiceAccountToken(t testing.TB, ns, name string, verbs ...string) string {
	t.Helper()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(verbs) > 0 {
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"lavaarchitectures"}, Verbs: verbs}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// Kubeconfig writes a kubeconfig file for e's API server (envtest's admin client certificate)
// into a temporary directory of t and returns its path, for processes under test (lava up,
// Flux's source-controller, kubectl).
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	cfg := e.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("kubetest: write kubeconfig: %v", err)
	}
	return path
}

// SourceControllerDirEnv names the directory `make tools-source-controller` builds: Flux's
// source-controller binary and its CRDs (crd/).
const SourceControllerDirEnv = "LAVA_SOURCE_CONTROLLER_DIR"

// InstallFluxCRDs installs Flux's source CRDs from $LAVA_SOURCE_CONTROLLER_DIR/crd into e's
// API server and returns that directory. An unset variable or a missing directory fails t
// (never a skip).
func (e *Env) InstallFluxCRDs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(SourceControllerDirEnv)
	if dir == "" {
		t.Fatalf("%s is not set: run `make tools-source-controller` and the tests through make (or export %s=$HOME/.cache/lava/tools/source-controller-v1.9.6)", SourceControllerDirEnv, SourceControllerDirEnv)
	}
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crd")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install Flux's CRDs from %s/crd: %v", dir, err)
	}
	return dir
}

// StartWithControllers is [Start] with kube-controller-manager beside the API server: it runs
// hack/tools/kube-testenv.sh (found above the working directory) with the binaries of
// $KUBEBUILDER_ASSETS, so the garbage collector, namespace and ServiceAccount controllers run
// and a deleted namespace finishes terminating, as for a client that waits until its
// namespace is gone. Lava's CRDs are installed; the admin reaches the API server with a bearer
// token. Everything stops on t.Cleanup, and with the test process if that is killed (the
// script's watchdog).
func StartWithControllers(t testing.TB) *Env {
	t.Helper()
	assets, err := Assets()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-controller-manager")); err != nil {
		t.Fatalf("kubetest: kube-controller-manager missing (%s=%s): build it with `make tools-kube`: %v", AssetsEnv, assets, err)
	}
	script, err := findUp(filepath.Join("hack", "tools", "kube-testenv.sh"))
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Cleanup(func() {
		if b, err := exec.Command(script, "down", state).CombinedOutput(); err != nil {
			t.Errorf("kubetest: kube-testenv.sh down: %v\n%s", err, b)
		}
	})
	up := exec.Command(script, "up", state, assets)
	up.Env = append(os.Environ(), "KUBE_TESTENV_KCM=1")
	if b, err := up.CombinedOutput(); err != nil {
		t.Fatalf("kubetest: kube-testenv.sh up: %v\n%s", err, b)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if cfg.CAData, err = os.ReadFile(cfg.CAFile); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	cfg.CAFile = ""
	crds, scheme := crdsAndScheme(t)
	installed, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds, Scheme: scheme})
	if err != nil {
		t.Fatalf("kubetest: install CRDs: %v", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("kubetest: client: %v", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, CRDs: installed}
}

// findUp returns the first dir/rel that exists, dir being the working directory or one of
// its parents.
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("kubetest: no %s above the working directory", rel)
		}
		dir = parent
	}
}
