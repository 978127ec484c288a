//go:build cluster

package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCluster_networkPolicy puts a pod behind a NetworkPolicy that admits only pods labelled
// role=client: a pod without the label is blocked (it polls until the policy takes effect), then
// a pod with it gets through, so the policy is enforced, not merely stored.
func TestCluster_networkPolicy(t *testing.T) {
	ctx := t.Context()
	cs := client(t)
	ns := namespace(t, cs)

	web := probePod("web", corev1.RestartPolicyAlways, "serve", ":8080")
	web.Labels = map[string]string{"app": "web"}
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod web: %v", err)
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-from-clients"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create network policy: %v", err)
	}
	p := waitPod(t, cs, ns, "web", 3*time.Minute, func(p *corev1.Pod) bool { return p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning })
	url := fmt.Sprintf("http://%s:8080/", p.Status.PodIP)

	start := time.Now()
	logs := runToEnd(t, cs, ns, probePod("stranger", corev1.RestartPolicyNever, "blocked", url), corev1.PodSucceeded)
	t.Logf("a pod without role=client is blocked (%s after the policy):\n%s", time.Since(start).Round(time.Millisecond), logs)

	// kube-router admits a new pod's traffic once it has seen the pod's address: the pod retries.
	friend := probePod("friend", corev1.RestartPolicyNever, "reach", url)
	friend.Labels = map[string]string{"role": "client"}
	logs = runToEnd(t, cs, ns, friend, corev1.PodSucceeded)
	if !strings.Contains(logs, "200 OK hello from web") {
		t.Errorf("pod friend (role=client) did not reach web:\n%s", logs)
	}
	t.Logf("a pod with role=client gets through:\n%s", logs)
}
