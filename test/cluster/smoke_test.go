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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// probeImage is the smoke workload hack/cluster/images builds (images.ProbeRef) and up.sh imports.
const probeImage = "localhost/lava-node/probe:1"

// TestCluster_smoke runs a pod behind a ClusterIP Service and, from a second pod, reaches it by the
// Service's IP and by its DNS name; the pod answers /whoami by presenting its ServiceAccount token
// to the API server (through the kubernetes Service), so the answer names its ServiceAccount.
func TestCluster_smoke(t *testing.T) {
	ctx := t.Context()
	cs := client(t)
	ns := namespace(t, cs)
	start := time.Now()

	echo := probePod("echo", corev1.RestartPolicyAlways, "serve", ":8080")
	echo.Labels = map[string]string{"app": "echo"}
	echo.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	echo.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1,
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, echo, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod echo: %v", err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "echo"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service echo: %v", err)
	}
	waitPod(t, cs, ns, "echo", 3*time.Minute, func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	t.Logf("pod echo Ready after %s", time.Since(start).Round(time.Millisecond))

	byIP := fmt.Sprintf("http://%s/", svc.Spec.ClusterIP)
	byName := fmt.Sprintf("http://echo.%s.svc.cluster.local/whoami", ns)
	clientStart := time.Now()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, probePod("client", corev1.RestartPolicyNever, "get", byIP, byName), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod client: %v", err)
	}
	done := waitPod(t, cs, ns, "client", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of pod client: %v", err)
	}
	t.Logf("pod client %s after %s:\n%s", done.Status.Phase, time.Since(clientStart).Round(time.Millisecond), logs)
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod client %s: a GET through the Service failed (log above)", done.Status.Phase)
	}
	for _, want := range []string{
		"GET " + byIP + " -> 200 OK hello from echo",
		"GET " + byName + " -> 200 OK user system:serviceaccount:" + ns + ":default",
	} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("pod client's log lacks %q", want)
		}
	}
}

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
