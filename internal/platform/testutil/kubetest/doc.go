// Package kubetest starts a real Kubernetes API server for tests: envtest
// (sigs.k8s.io/controller-runtime/pkg/envtest) running the kube-apiserver and etcd binaries in
// $KUBEBUILDER_ASSETS (built by `make tools-kube`), with Lava's CRDs from config/crd installed.
//
// A missing binary fails the test with a message naming `make tools-kube`; the helper never
// skips. There is no kube-controller-manager: no garbage collection, no default ServiceAccount,
// and deleted namespaces never finish terminating, so give each test its own namespace
// ([Env.Namespace]) instead of deleting and reusing one. A test that needs those controllers
// (a client that waits until the namespace it deleted is gone) uses [StartWithControllers],
// which runs hack/tools/kube-testenv.sh with kube-controller-manager instead.
package kubetest
