//go:build cluster

package cluster_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// nodeIP is the node address hack/cluster/up.sh puts on its port-less bridge (NODE_IP).
const nodeIP = "10.99.0.1"

// TestCluster_podsReachNoHostService listens on the node address and on the host's own address
// (the one outside the cluster) and checks that a pod reaches neither: from a pod, the host
// answers only at the API server (the nft table inet lava_cluster).
func TestCluster_podsReachNoHostService(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	var hits atomic.Int64
	var urls []string
	for _, ip := range []string{nodeIP, hostIP(t)} {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("listen on %s: %v", ip, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			fmt.Fprintln(w, "host")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		urls = append(urls, "http://"+ln.Addr().String()+"/")
	}
	for i, url := range urls {
		logs := runToEnd(t, cs, ns, probePod(fmt.Sprintf("outsider-%d", i), corev1.RestartPolicyNever, "blocked", url), corev1.PodSucceeded)
		if !strings.Contains(logs, "blocked after 1 tries") {
			t.Errorf("a pod reached %s:\n%s", url, logs)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's listeners got %d requests from pods", n)
	}
}

// hostIP returns the host's first IPv4 address outside loopback and the cluster's ranges.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("host addresses: %v", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || ipn.IP.String() == nodeIP || strings.HasPrefix(ipn.IP.String(), "10.244.") {
			continue
		}
		return ipn.IP.String()
	}
	t.Fatal("no IPv4 address outside loopback and the cluster on this host")
	return ""
}
