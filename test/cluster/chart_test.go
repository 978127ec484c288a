//go:build cluster

package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The namespaces of TestCluster_chart: NATS (hack/cluster/nats.yaml), the release, and the one
// examples/notes.yaml's objects live in (the release watches it).
const (
	natsNS    = "nats"
	releaseNS = "lava-system"
	demoNS    = "demo"
)

// lavaServices are the chart's Deployments, lava-<service>.
var lavaServices = []string{"watcher", "synth", "applier", "drift", "viggy", "anomaly", "attest"}

// TestCluster_chart installs Lava as docs/install.md says, on the one-node cluster, through helm
// and kubectl: it builds the images (make images IMAGES_TOFU=1, and the nats image of the cached
// nats-server) and imports them into containerd; runs a 3-server JetStream cluster (hack/cluster/nats.yaml)
// with Lava's per-service nkey users, mutual TLS from a CA made here and encryption at rest;
// installs the chart with --wait into a namespace where Pod Security Admission enforces
// `restricted` (hack/cluster/lava-values.yaml), with the applier's file volume a node directory
// (hack/cluster/lava-files.yaml); applies examples/notes.yaml until Applied and Ready, deletes it
// (destroyed, finalizer removed). Then, in subtests that run in order (lifecycle_test.go): the
// tenant of hack/cluster/tenant.yaml (RBAC, a refused cross-namespace reference, NetworkPolicies);
// /metrics of every service through its Service; a local_file by the tofu engine
// (hack/cluster/tofu.yaml; the images carry OpenTofu); every other example of examples/ (not
// cloud/) Applied, its files on the volume, deleted (faults_test.go); the tenant's object
// hack/cluster/kit.yaml with the applier's pod deleted mid-create, a NATS pod deleted, 3 applier
// replicas, and NATS cut off (readiness false, then true), each change applied exactly once.
// Then faults, each named by an Event or a log line and each put right (faults_test.go): an image
// never imported, a Secret deleted, a bootstrap Job that fails, NATS without the topology. It
// uninstalls and checks that no workload is left. It logs the timings and the idle memory of
// every Lava pod.
func TestCluster_chart(t *testing.T) {
	e := newChartEnv(t)
	work := t.TempDir()

	// ---- images: Lava's and NATS', imported as up.sh imports the node images.
	start := time.Now()
	images := filepath.Join(work, "images")
	e.run(t, "make", "images", "IMAGES_DIR="+images, "IMAGES_TOFU=1")
	natsVersion := e.natsVersion(t)
	natsImage := "localhost/lava-node/nats:" + natsVersion
	e.run(t, "go", "run", "./hack/mkimage", "-out", images, "-registry", "localhost/lava-node", "-nats", e.natsBin, "nats:"+natsVersion)
	tars, _ := filepath.Glob(filepath.Join(images, "*.tar"))
	for _, tar := range tars {
		e.run(t, "ctr", "--address", filepath.Join(e.clusterDir, "run", "containerd.sock"), "-n", "k8s.io", "images", "import", tar)
	}
	t.Logf("images built and imported in %s: %d", time.Since(start).Round(time.Second), len(tars))
	manifest, err := os.ReadFile(filepath.Join(e.repo, "hack/cluster/nats.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(manifest, []byte("image: "+natsImage+"\n")) {
		t.Fatalf("hack/cluster/nats.yaml does not run %s, the image of %s", natsImage, e.natsBin)
	}
	lava := filepath.Join(work, "lava")
	e.run(t, "go", "build", "-o", lava, "./cmd/lava")

	t.Cleanup(func() { e.cleanup(t) })

	// ---- NATS: identities, PKI, encryption key, the servers.
	creds, pki := filepath.Join(work, "nats-credentials"), filepath.Join(work, "pki")
	e.run(t, lava, "nats", "credentials", creds)
	auth := e.run(t, lava, "nats", "authorization", creds, "--replicas", "3")
	authFile := filepath.Join(work, "lava-authorization.conf")
	writeFile(t, authFile, auth, 0o644)
	e.run(t, "hack/cluster/nats-certs.sh", pki)
	jsKey := filepath.Join(work, "js.key")
	writeFile(t, jsKey, randomHex(t), 0o600)
	for _, ns := range []string{natsNS, releaseNS, demoNS} {
		e.kubectl(t, "create", "namespace", ns)
	}
	for _, ns := range []string{natsNS, releaseNS} {
		e.kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	}
	e.kubectl(t, "-n", natsNS, "create", "secret", "generic", "nats-server-tls",
		"--from-file=tls.crt="+pki+"/server.crt", "--from-file=tls.key="+pki+"/server.key", "--from-file=ca.crt="+pki+"/ca.crt")
	e.kubectl(t, "-n", natsNS, "create", "secret", "generic", "nats-js-key", "--from-file=key="+jsKey)
	e.kubectl(t, "-n", natsNS, "create", "configmap", "nats-authorization", "--from-file=authorization.conf="+authFile)
	start = time.Now()
	e.kubectl(t, "apply", "-f", "hack/cluster/nats.yaml")
	e.kubectl(t, "-n", natsNS, "rollout", "status", "statefulset/nats", "--timeout=3m")
	t.Logf("NATS: 3 servers Ready %s after kubectl apply", time.Since(start).Round(time.Millisecond))
	natsLog := e.kubectl(t, "-n", natsNS, "logs", "nats-0")
	for _, want := range []string{"Encryption:      ChaCha20-Poly1305", "TLS required for client connections"} {
		if !strings.Contains(natsLog, want) {
			t.Errorf("nats-0's log lacks %q", want)
		}
	}

	// ---- Lava: the Secrets, then the chart.
	for _, id := range []string{"watcher", "synth", "applier", "drift", "viggy", "anomaly", "attest", "bootstrap"} {
		e.kubectl(t, "-n", releaseNS, "create", "secret", "generic", "lava-nats-"+id, "--from-file=nkey="+creds+"/"+id+".nk")
	}
	e.kubectl(t, "-n", releaseNS, "create", "secret", "generic", "nats-ca", "--from-file=ca.crt="+pki+"/ca.crt")
	e.kubectl(t, "-n", releaseNS, "create", "secret", "tls", "nats-client", "--cert="+pki+"/client.crt", "--key="+pki+"/client.key")
	attestKey, bindingsKey := filepath.Join(work, "attest.key"), filepath.Join(work, "bindings.key")
	writeFile(t, filepath.Join(work, "attest.pub"), e.run(t, lava, "receipts", "keygen", "--secret-file", attestKey), 0o644)
	e.kubectl(t, "-n", releaseNS, "create", "secret", "generic", "lava-attest-signing-key", "--from-file=key="+attestKey)
	writeFile(t, bindingsKey, randomHex(t), 0o600)
	e.kubectl(t, "-n", releaseNS, "create", "secret", "generic", "lava-synth-bindings-key", "--from-file=key="+bindingsKey)

	// The applier's file volume: a node directory (the services' user owns it) as a PersistentVolume.
	files := filepath.Join(work, "lava-files")
	if err := os.MkdirAll(filepath.Join(files, demoNS), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{files, filepath.Join(files, demoNS)} {
		if err := os.Chown(d, 65532, 65532); err != nil {
			t.Fatal(err)
		}
	}
	pv, err := os.ReadFile(filepath.Join(e.repo, "hack/cluster/lava-files.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pvFile := filepath.Join(work, "lava-files.yaml")
	writeFile(t, pvFile, strings.ReplaceAll(string(pv), "LAVA_FILES_DIR", files), 0o644)
	e.kubectl(t, "apply", "-f", pvFile)

	start = time.Now()
	e.run(t, e.helm, "install", "lava", "deploy/charts/lava", "-n", releaseNS, "-f", "hack/cluster/lava-values.yaml", "--wait", "--timeout=5m")
	installed := time.Since(start)
	e.kubectl(t, "-n", releaseNS, "wait", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/instance=lava", "--timeout=2m")
	t.Logf("helm install --wait (bootstrap Job included) to every Lava pod Ready: %s", installed.Round(time.Millisecond))
	pods := e.lavaPods(t)
	for _, svc := range lavaServices {
		if _, ok := pods[svc]; !ok {
			t.Errorf("no Ready pod of lava-%s", svc)
		}
	}
	// Pod Security Admission enforces restricted there: a pod without a securityContext is refused.
	if out, err := e.try(t.Context(), "kubectl", "-n", releaseNS, "run", "psa-check", "--image=localhost/lava-node/pause:1", "--restart=Never", "--dry-run=server"); err == nil || !strings.Contains(out, `violates PodSecurity "restricted`) {
		t.Errorf("a pod without a securityContext in %s: %v %s; want it refused by PodSecurity restricted", releaseNS, err, out)
	}
	e.checkTopology(t)
	idle := e.memory(t, "idle, right after the install", pods)

	// ---- examples/notes.yaml: Applied, Ready, deleted (destroyed, finalizer removed).
	objs := []string{"lavaarchitecture/release-notes", "lavaarchitecture/team-roster"}
	start = time.Now()
	e.kubectl(t, "apply", "-f", "examples/notes.yaml")
	e.kubectl(t, append([]string{"-n", demoNS, "wait", "--for=jsonpath={.status.phase}=Applied", "--timeout=3m"}, objs...)...)
	first := time.Since(start)
	e.kubectl(t, append([]string{"-n", demoNS, "wait", "--for=condition=Ready", "--timeout=1m"}, objs...)...)
	t.Logf("kubectl apply -f examples/notes.yaml to both Applied: %s (first apply)", first.Round(time.Millisecond))
	e.kubectl(t, "delete", "-f", "examples/notes.yaml", "--wait", "--timeout=2m")
	if out, err := e.try(t.Context(), "kubectl", append([]string{"-n", demoNS, "get", "--ignore-not-found", "-o", "name"}, objs...)...); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("after kubectl delete: %q %v, want both objects gone (finalizer removed)", out, err)
	}
	e.checkDestroyed(t, map[string]int{"demo/release-notes": 1, "demo/team-roster": 3})

	var applies []time.Duration
	for range 10 {
		start = time.Now()
		e.kubectl(t, "apply", "-f", "examples/notes.yaml")
		e.kubectl(t, append([]string{"-n", demoNS, "wait", "--for=jsonpath={.status.phase}=Applied", "--timeout=3m"}, objs...)...)
		applies = append(applies, time.Since(start))
		e.kubectl(t, "delete", "-f", "examples/notes.yaml", "--wait", "--timeout=2m")
	}
	slices.Sort(applies)
	t.Logf("kubectl apply -f examples/notes.yaml to both Applied, 10 times: p50 %s, min %s, max %s",
		applies[len(applies)/2].Round(time.Millisecond), applies[0].Round(time.Millisecond), applies[len(applies)-1].Round(time.Millisecond))
	e.memory(t, "idle, after 11 applies and deletes", e.lavaPods(t))
	for _, svc := range lavaServices {
		if m, ok := idle[svc]; ok && m.anon > 40<<20 {
			t.Errorf("lava-%s idle: %d MiB anonymous memory, want at most 40 MiB", svc, m.anon>>20)
		}
	}

	// ---- The tenant, metrics, and the failures an installation lives through, in this order:
	// each later step applies the next generation of the tenant's object (hack/cluster/kit.yaml).
	l := &lifecycle{e: e, files: files, creds: creds}
	steps := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"tenant", l.tenant},
		{"metrics", l.metrics},
		{"tofuEngine", l.tofuEngine},
		{"examples", l.examples},
		{"applierDeletedMidApply", l.applierDeleted},
		{"natsPodDeleted", l.natsPodDeleted},
		{"applierReplicas", l.applierReplicas},
		{"natsUnreachable", l.natsUnreachable},
	}
	for _, st := range steps {
		start = time.Now()
		t.Run(st.name, st.fn)
		t.Logf("%s: %s", st.name, time.Since(start).Round(time.Millisecond))
	}
	l.appliedOnce(t)
	e.kubectl(t, "--as="+tenantUser, "delete", "-f", "hack/cluster/kit.yaml", "--wait", "--timeout=2m")
	if l.gens > 0 {
		if _, err := os.Stat(filepath.Join(files, kitFile(l.gens))); err == nil {
			t.Errorf("%s is still there after demo/kit was deleted", kitFile(l.gens))
		}
	}

	// ---- Faults of the installation, each named by an Event or a log line, each restored:
	// an image that is not there, a Secret that is not there, a bootstrap Job that fails, NATS
	// without the topology (last: its store is lost; the next helm upgrade restores both).
	for _, st := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"imageMissing", l.imageMissing},
		{"secretMissing", l.secretMissing},
		{"bootstrapFails", l.bootstrapFails},
		{"topologyMissing", l.topologyMissing},
	} {
		start = time.Now()
		if !t.Run(st.name, st.fn) {
			t.FailNow()
		}
		t.Logf("%s: %s", st.name, time.Since(start).Round(time.Millisecond))
	}

	// ---- helm uninstall: no Lava workload left.
	start = time.Now()
	e.run(t, e.helm, "uninstall", "lava", "-n", releaseNS, "--wait", "--timeout=3m")
	uninstalled := time.Since(start)
	e.kubectl(t, "-n", releaseNS, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/instance=lava", "--timeout=2m")
	t.Logf("helm uninstall --wait: %s; every Lava pod gone after %s", uninstalled.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	left := e.kubectl(t, "get", "deploy,rs,statefulset,daemonset,job,pod,svc,sa,configmap,networkpolicy,role,rolebinding",
		"-A", "-l", "app.kubernetes.io/instance=lava", "-o", "name")
	left += e.kubectl(t, "get", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/instance=lava", "-o", "name")
	if strings.TrimSpace(left) != "" {
		t.Errorf("after helm uninstall, left:\n%s", left)
	}
	// Whatever the labels: no workload, Service or ServiceAccount but the namespace's default.
	left = e.kubectl(t, "-n", releaseNS, "get", "deploy,rs,statefulset,daemonset,job,cronjob,pod,svc,sa", "-o", "name")
	if strings.TrimSpace(left) != "serviceaccount/default" {
		t.Errorf("after helm uninstall, %s holds:\n%s\nwant only serviceaccount/default", releaseNS, left)
	}
	t.Logf("after helm uninstall, %s keeps (not the release's workloads):\n%s", releaseNS,
		e.kubectl(t, "-n", releaseNS, "get", "secret,configmap,pvc,lease", "-o", "name"))
}

// chartEnv is what TestCluster_chart runs: the repository, the cluster and the tools.
type chartEnv struct {
	repo, clusterDir, kubeconfig string
	kubectlBin, helm, natsBin    string
}

// newChartEnv finds the cluster ($LAVA_CLUSTER_DIR), kubectl ($KUBE_NODE_DIR/kubectl, else the
// PATH's, which $LAVA_CLUSTER_DIR/env sets), helm ($LAVA_HELM_BIN) and nats-server
// ($LAVA_NATS_SERVER_BIN, which must be static: the image has no C library); it fails naming
// what is missing.
func newChartEnv(t *testing.T) *chartEnv {
	t.Helper()
	client(t) // fails unless a cluster runs
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	e := &chartEnv{repo: repo, clusterDir: os.Getenv("LAVA_CLUSTER_DIR"), helm: os.Getenv("LAVA_HELM_BIN"), natsBin: os.Getenv("LAVA_NATS_SERVER_BIN")}
	e.kubeconfig = filepath.Join(e.clusterDir, "kubeconfig")
	if d := os.Getenv("KUBE_NODE_DIR"); d != "" {
		e.kubectlBin = filepath.Join(d, "kubectl")
	} else if e.kubectlBin, err = exec.LookPath("kubectl"); err != nil {
		t.Fatal("no kubectl: set KUBE_NODE_DIR or source $LAVA_CLUSTER_DIR/env (make tools-kube-node builds it)")
	}
	for v, target := range map[string]string{"LAVA_HELM_BIN": "tools-helm", "LAVA_NATS_SERVER_BIN": "tools-nats"} {
		if p := os.Getenv(v); p == "" {
			t.Fatalf("%s is not set: make test-cluster sets it (make %s builds it)", v, target)
		} else if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v (make %s builds it)", v, err, target)
		}
	}
	f, err := elf.Open(e.natsBin)
	if err != nil {
		t.Fatalf("nats-server %s: %v", e.natsBin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("nats-server %s is dynamically linked: the nats image has no C library (build it with CGO_ENABLED=0)", e.natsBin)
		}
	}
	return e
}

// natsVersion is the version nats-server --version prints ("v2.15.2").
func (e *chartEnv) natsVersion(t *testing.T) string {
	t.Helper()
	out := e.run(t, e.natsBin, "--version")
	v, ok := strings.CutPrefix(strings.TrimSpace(out), "nats-server: ")
	if !ok || !strings.HasPrefix(v, "v") {
		t.Fatalf("nats-server --version: %q", out)
	}
	return v
}

// try runs name with args in the repository (name "kubectl": the cluster's kubectl), with
// KUBECONFIG the cluster's, for at most 10 minutes, and returns its combined output.
func (e *chartEnv) try(ctx context.Context, name string, args ...string) (string, error) {
	if name == "kubectl" {
		name = e.kubectlBin
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.repo
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run is try that fails the test, with the output, when the command fails.
func (e *chartEnv) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := e.try(t.Context(), name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

// kubectl runs kubectl with args (e.run).
func (e *chartEnv) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return e.run(t, "kubectl", args...)
}

// lavaPods returns the Ready pod of each Lava service: service -> pod UID.
func (e *chartEnv) lavaPods(t *testing.T) map[string]string {
	t.Helper()
	out := e.kubectl(t, "-n", releaseNS, "get", "pods", "-l", "app.kubernetes.io/instance=lava",
		"-o", `jsonpath={range .items[*]}{.metadata.labels.app\.kubernetes\.io/component} {.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	pods := map[string]string{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "True" {
			pods[f[0]] = f[1]
		}
	}
	return pods
}

// checkTopology reads nats-0's JetStream report (/jsz, through the API server's pod proxy) and
// checks what the bootstrap hook Job made: a 3-server meta cluster, Lava's streams and buckets
// (LAVA_PHASES, KV_lava-state among them) each with 3 replicas, no key-value bucket with direct
// gets (their reads go to the stream leader).
func (e *chartEnv) checkTopology(t *testing.T) {
	t.Helper()
	raw := e.kubectl(t, "get", "--raw", "/api/v1/namespaces/"+natsNS+"/pods/nats-0:8222/proxy/jsz?streams=true&config=true")
	var jsz struct {
		Streams int `json:"streams"`
		Meta    struct {
			Size int `json:"cluster_size"`
		} `json:"meta_cluster"`
		Accounts []struct {
			Streams []struct {
				Name   string `json:"name"`
				Config struct {
					Replicas    int  `json:"num_replicas"`
					AllowDirect bool `json:"allow_direct"`
				} `json:"config"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal([]byte(raw), &jsz); err != nil {
		t.Fatalf("nats-0 /jsz: %v\n%s", err, raw)
	}
	if jsz.Meta.Size != 3 {
		t.Errorf("JetStream meta cluster of %d servers, want 3", jsz.Meta.Size)
	}
	var names []string
	for _, a := range jsz.Accounts {
		for _, st := range a.Streams {
			names = append(names, st.Name)
			if st.Config.Replicas != 3 {
				t.Errorf("stream %s: %d replicas, want 3 (nats.streamReplicas)", st.Name, st.Config.Replicas)
			}
			if strings.HasPrefix(st.Name, "KV_") && st.Config.AllowDirect {
				t.Errorf("bucket stream %s allows direct gets", st.Name)
			}
		}
	}
	for _, want := range []string{"LAVA_PHASES", "LAVA_RESOURCES", "KV_lava-state", "KV_lava-leases"} {
		if !slices.Contains(names, want) {
			t.Errorf("no stream %s (streams: %v)", want, names)
		}
	}
	t.Logf("JetStream: %d streams on a %d-server cluster, each with 3 replicas", len(names), jsz.Meta.Size)
}

// podMemory is the memory of a pod's main process, from /proc/PID/status on the node.
type podMemory struct {
	// rss is VmRSS; anon is RssAnon plus RssShmem, file RssFile (the executable's pages and
	// other mapped files, shared with every process that maps them), in bytes.
	rss, anon, file int64
	// cgroup is the container's memory cgroup usage (memory.usage_in_bytes on cgroup v1,
	// memory.current on v2), what the kubelet reports and the limit applies to: file pages
	// are charged to whoever read them first (here containerd, which unpacked the image), so
	// it is close to anon. -1 when unreadable.
	cgroup int64
}

// cgroupMemory returns the memory usage of the cgroup the process whose /proc/PID/cgroup is cg
// is in, -1 when it cannot be read.
func cgroupMemory(cg []byte) int64 {
	for line := range strings.Lines(string(cg)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		var p string
		switch {
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			p = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.usage_in_bytes")
		case f[0] == "0" && f[1] == "":
			p = filepath.Join("/sys/fs/cgroup", f[2], "memory.current")
		default:
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// memory reads the memory of each pod's process (the one that is not the pause sandbox) from
// /proc on the node, finding it by the pod UID in /proc/PID/cgroup, and logs it under when.
func (e *chartEnv) memory(t *testing.T, when string, pods map[string]string) map[string]podMemory {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	out := map[string]podMemory{}
	var b strings.Builder
	for _, svc := range lavaServices {
		uid, ok := pods[svc]
		if !ok {
			continue
		}
		for _, p := range procs {
			cg, err := os.ReadFile(filepath.Join(p, "cgroup"))
			if err != nil || !(bytes.Contains(cg, []byte("pod"+uid)) || bytes.Contains(cg, []byte("pod"+strings.ReplaceAll(uid, "-", "_")))) {
				continue
			}
			st, err := readStatus(filepath.Join(p, "status"))
			if err != nil || st["Name"] == "pause" {
				continue
			}
			kib := func(k string) int64 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(st[k], " kB"), 10, 64)
				return n << 10
			}
			m := podMemory{rss: kib("VmRSS"), anon: kib("RssAnon") + kib("RssShmem"), file: kib("RssFile"), cgroup: cgroupMemory(cg)}
			out[svc] = m
			fmt.Fprintf(&b, "\n  lava-%-8s RSS %5.1f MiB (anonymous %5.1f, file %5.1f); cgroup %5.1f MiB", svc, mib(m.rss), mib(m.anon), mib(m.file), mib(m.cgroup))
		}
		if _, ok := out[svc]; !ok {
			t.Errorf("lava-%s (pod %s): no process found on the node", svc, uid)
		}
	}
	t.Logf("memory of the Lava pods, %s:%s", when, b.String())
	return out
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// readStatus parses a /proc/PID/status file into its fields.
func readStatus(p string) (map[string]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// checkDestroyed reads the applier's log for a "destroyed" line of each resource of want with
// the count of destroyed Terraform resources want gives, none orphaned.
func (e *chartEnv) checkDestroyed(t *testing.T, want map[string]int) {
	t.Helper()
	// The applier logs "destroyed" after it published Destroyed, on which the watcher removes
	// the finalizer: the line may come a moment after the object is gone.
	var got map[string]int
	orphaned := map[string]bool{}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got = map[string]int{}
		for line := range strings.Lines(e.kubectl(t, "-n", releaseNS, "logs", "deploy/lava-applier")) {
			var l struct {
				Msg       string `json:"msg"`
				Resource  string `json:"resource"`
				Orphaned  bool   `json:"orphaned"`
				Destroyed int    `json:"destroyed_count"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "destroyed" {
				continue
			}
			orphaned[l.Resource] = l.Orphaned
			got[l.Resource] = l.Destroyed
		}
		if destroyedAll(got, want) || time.Now().After(deadline) {
			break
		}
	}
	for r, n := range want {
		if got[r] != n {
			t.Errorf("applier destroyed %d resources of %s, want %d", got[r], r, n)
		}
		if orphaned[r] {
			t.Errorf("%s orphaned, want destroyed", r)
		}
	}
}

// destroyedAll reports whether got has each resource of want with its count.
func destroyedAll(got, want map[string]int) bool {
	for r, n := range want {
		if got[r] != n {
			return false
		}
	}
	return true
}

// cleanup prints what a failed run leaves to look at, deletes the examples while Lava runs
// (their finalizer needs it), uninstalls and deletes the namespaces.
func (e *chartEnv) cleanup(t *testing.T) {
	ctx := context.WithoutCancel(t.Context())
	if t.Failed() {
		out, _ := e.try(ctx, "kubectl", "get", "pods,jobs,lava", "-A", "-o", "wide")
		ev, _ := e.try(ctx, "kubectl", "get", "events", "-A", "--field-selector=type=Warning")
		t.Logf("after the failure:\n%s\nwarnings:\n%s", out, ev)
		for _, svc := range lavaServices {
			if l, err := e.try(ctx, "kubectl", "-n", releaseNS, "logs", "deploy/lava-"+svc, "--tail=20"); err == nil {
				t.Logf("lava-%s, last lines:\n%s", svc, redactSeeds(l))
			}
		}
	}
	e.try(ctx, "kubectl", "apply", "-f", "hack/cluster/nats.yaml") // a step that failed may have left NATS cut off
	for _, f := range []string{"examples/notes.yaml", "examples/local-files.yaml", "examples/testkit.yaml", "examples/tofu-files.yaml",
		"hack/cluster/kit.yaml", "hack/cluster/cross.yaml", "hack/cluster/tofu.yaml"} {
		if out, err := e.try(ctx, "kubectl", "delete", "-f", f, "--ignore-not-found", "--timeout=1m"); err != nil {
			t.Logf("delete %s: %v\n%s", f, err, out)
		}
	}
	if out, err := e.try(ctx, e.helm, "uninstall", "lava", "-n", releaseNS, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
		t.Logf("helm uninstall: %v\n%s", err, out)
	}
	if out, err := e.try(ctx, "kubectl", "delete", "namespace", demoNS, releaseNS, natsNS, "--ignore-not-found", "--timeout=2m"); err != nil {
		t.Logf("delete namespaces: %v\n%s", err, out)
	}
	if out, err := e.try(ctx, "kubectl", "delete", "persistentvolume", "lava-files", "--ignore-not-found", "--timeout=1m"); err != nil {
		t.Logf("delete the PersistentVolume lava-files: %v\n%s", err, out)
	}
}

var seedRE = regexp.MustCompile(`S[A-Z][A-Z2-7]{50,}`)

// redactSeeds hides anything shaped like an nkey seed in s.
func redactSeeds(s string) string { return seedRE.ReplaceAllString(s, "[seed]") }

// writeFile writes s to p with mode perm.
func writeFile(t *testing.T, p, s string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), perm); err != nil {
		t.Fatal(err)
	}
}

// randomHex is 32 random bytes as 64 hex digits, the keys docs/install.md makes with od.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
