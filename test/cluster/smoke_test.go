//go:build cluster

package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

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
	logs := runToEnd(t, cs, ns, probePod("client", corev1.RestartPolicyNever, "get", byIP, byName), corev1.PodSucceeded)
	t.Logf("pod client done after %s:\n%s", time.Since(clientStart).Round(time.Millisecond), logs)
	for _, want := range []string{
		"GET " + byIP + " -> 200 OK hello from echo",
		"GET " + byName + " -> 200 OK user system:serviceaccount:" + ns + ":default",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("pod client's log lacks %q", want)
		}
	}
}
