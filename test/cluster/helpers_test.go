//go:build cluster

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// probeImage is the smoke workload (hack/cluster/probe) whose image up.sh builds with hack/mkimage
// and imports.
const probeImage = "localhost/lava-node/probe:1"

// client returns a clientset for the admin kubeconfig of the cluster in $LAVA_CLUSTER_DIR.
func client(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	dir := os.Getenv("LAVA_CLUSTER_DIR")
	if dir == "" {
		t.Fatal("LAVA_CLUSTER_DIR is not set: run make test-cluster (or make cluster-up, then go test with LAVA_CLUSTER_DIR set)")
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Fatalf("no running cluster: %v (make cluster-up writes it)", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cs
}

// namespace creates a namespace for one test, deleted when the test ends, and waits for its
// default ServiceAccount (kube-controller-manager makes it; pods are refused until then).
func namespace(t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	ctx := t.Context()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	cleanupCtx := context.WithoutCancel(ctx)
	t.Cleanup(func() {
		if err := cs.CoreV1().Namespaces().Delete(cleanupCtx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount: %v", ns.Name, err)
	}
	return ns.Name
}

// probePod is a pod running the probe image with args, as a non-root user with nothing but its
// binary (read-only root filesystem, no capabilities).
func probePod(name string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	nonRoot, uid, no, yes := true, int64(65532), false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &nonRoot, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            name,
				Image:           probeImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            args,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// waitPod polls pod name until done is true of it and returns it; on timeout it fails the test
// with the pod's status and events.
func waitPod(t *testing.T, cs *kubernetes.Clientset, ns, name string, timeout time.Duration, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // not there yet, or the API server is busy: poll again
		}
		last = p
		return done(p), nil
	})
	if err == nil {
		return last
	}
	events, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	var b strings.Builder
	if events != nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	status := "never seen"
	if last != nil {
		status = fmt.Sprintf("%s %+v", last.Status.Phase, last.Status.ContainerStatuses)
	}
	t.Fatalf("pod %s/%s: %v; status %s; events:%s", ns, name, err, status, b.String())
	return nil
}

// runToEnd creates pod, waits until it has ended and returns its log; it fails the test when the
// pod ended in another phase than want.
func runToEnd(t *testing.T, cs *kubernetes.Clientset, ns string, pod *corev1.Pod, want corev1.PodPhase) string {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	done := waitPod(t, cs, ns, pod.Name, 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of pod %s: %v", pod.Name, err)
	}
	if done.Status.Phase != want {
		t.Fatalf("pod %s %s, want %s; log:\n%s", pod.Name, done.Status.Phase, want, logs)
	}
	return string(logs)
}
