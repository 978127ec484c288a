//go:build cluster

package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// tenantUser is the ServiceAccount of hack/cluster/tenant.yaml, as kubectl --as names it.
const tenantUser = "system:serviceaccount:demo:tenant"

// kitFile is the file of hack/cluster/kit.yaml's generation gen, relative to the file volume.
func kitFile(gen int) string { return fmt.Sprintf("demo/kit-%d.txt", gen) }

// lifecycle is what the subtests of TestCluster_chart after the first applies share: the node
// directory behind the applier's file volume (hack/cluster/lava-files.yaml), the generations of
// hack/cluster/kit.yaml applied so far, and the applier logs of pods already gone.
type lifecycle struct {
	e     *chartEnv
	files string
	// creds is the directory of the nkey seeds (lava nats credentials), the Secrets' source.
	creds string
	gens  int
	// goneLogs are the logs of applier pods the test deleted, followed until they ended.
	goneLogs []string
}

// asTenant runs kubectl as the tenant's ServiceAccount.
func (l *lifecycle) asTenant(t *testing.T, args ...string) string {
	t.Helper()
	return l.e.kubectl(t, append([]string{"--as=" + tenantUser}, args...)...)
}

// poll calls fn every half second until it returns true, failing the test with what and the
// last status fn returned after timeout.
func poll(t *testing.T, timeout time.Duration, what string, fn func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, status := fn()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s (last: %s)", timeout, what, status)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tenant checks the tenant of hack/cluster/tenant.yaml under the chart's lockdown values: its
// ServiceAccount may create LavaArchitectures in demo and cannot read a Secret of Lava's
// namespace (kubectl auth can-i, then a real attempt); an object of its naming another
// namespace in spec.dependsOn is refused (CrossNamespaceRefRefused); a pod in demo reaches
// Lava's metrics port but neither NATS (4222) nor RenderService or ReceiptService (8080), while
// a pod in lava-system reaches both (the NetworkPolicies of hack/cluster/nats.yaml and the chart,
// enforced by kube-router).
func (l *lifecycle) tenant(t *testing.T) {
	e, ctx := l.e, t.Context()
	e.kubectl(t, "apply", "-f", "hack/cluster/tenant.yaml")
	canI := func(want string, args ...string) {
		out, err := e.try(ctx, "kubectl", append([]string{"auth", "can-i", "--as=" + tenantUser}, args...)...)
		if got := strings.TrimSpace(out); got != want || (err == nil) != (want == "yes") {
			t.Errorf("kubectl auth can-i %s as the tenant: %q (%v), want %s", strings.Join(args, " "), got, err, want)
		}
	}
	canI("yes", "create", "lavaarchitectures.lava.pleme.io", "-n", demoNS)
	canI("no", "get", "secrets", "-n", releaseNS)
	canI("no", "list", "secrets", "-n", releaseNS)
	canI("no", "get", "secrets", "-n", demoNS)
	for _, args := range [][]string{{"get", "secret", "lava-nats-applier"}, {"get", "secrets"}} {
		out, err := e.try(ctx, "kubectl", append([]string{"--as=" + tenantUser, "-n", releaseNS}, args...)...)
		if err == nil || !strings.Contains(out, "Forbidden") {
			t.Errorf("kubectl -n %s %s as the tenant: %v %q, want Forbidden", releaseNS, strings.Join(args, " "), err, out)
		}
	}

	l.asTenant(t, "apply", "-f", "hack/cluster/cross.yaml")
	poll(t, time.Minute, "demo/cross: no condition DependenciesReady False with reason CrossNamespaceRefRefused", func() (bool, string) {
		out, _ := e.try(ctx, "kubectl", "-n", demoNS, "get", "lavaarchitecture/cross", "-o", `jsonpath={.status.conditions[?(@.type=="DependenciesReady")].status} {.status.conditions[?(@.type=="DependenciesReady")].reason}`)
		return strings.TrimSpace(out) == "False CrossNamespaceRefRefused", out
	})
	l.asTenant(t, "delete", "-f", "hack/cluster/cross.yaml", "--wait", "--timeout=1m")

	cs := client(t)
	start := time.Now()
	metrics := "http://lava-synth." + releaseNS + ".svc:9090/metrics"
	nats, render, receipts := "tcp://nats."+natsNS+".svc:4222", "tcp://lava-synth."+releaseNS+".svc:8080", "tcp://lava-attest."+releaseNS+".svc:8080"
	logs := runToEnd(t, cs, demoNS, probePod("tenant-pod", corev1.RestartPolicyNever, "isolated", metrics, nats, render, receipts), corev1.PodSucceeded)
	for _, want := range []string{"DIAL nats.nats.svc:4222 -> blocked", "DIAL lava-synth.lava-system.svc:8080 -> blocked", "DIAL lava-attest.lava-system.svc:8080 -> blocked"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the tenant's pod: no %q in its log:\n%s", want, logs)
		}
	}
	t.Logf("a pod in %s reaches Lava's metrics port, not NATS nor the RPC ports (%s):\n%s", demoNS, time.Since(start).Round(time.Millisecond), probeSummary(logs))
	logs = runToEnd(t, cs, releaseNS, probePod("lava-side-pod", corev1.RestartPolicyNever, "reach", nats, render, receipts), corev1.PodSucceeded)
	t.Logf("a pod in %s reaches them:\n%s", releaseNS, logs)
	e.kubectl(t, "-n", demoNS, "delete", "pod", "tenant-pod")
	e.kubectl(t, "-n", releaseNS, "delete", "pod", "lava-side-pod")
}

var lavaMetricRE = regexp.MustCompile(`(?m)^# TYPE (lava_[a-z0-9_]+) `)

// metrics scrapes /metrics of every Lava service through its Service (port metrics, 9090) from
// a pod in demo, as a Prometheus in the cluster would, and checks that each answers with Lava's
// own metrics.
func (l *lifecycle) metrics(t *testing.T) {
	var urls []string
	for _, svc := range lavaServices {
		urls = append(urls, "http://lava-"+svc+"."+releaseNS+".svc:9090/metrics")
	}
	// reach, not get: kube-router admits a new pod's traffic once it has seen its address.
	logs := runToEnd(t, client(t), demoNS, probePod("scrape", corev1.RestartPolicyNever, append([]string{"reach"}, urls...)...), corev1.PodSucceeded)
	var b strings.Builder
	for i, u := range urls {
		body := ""
		if at := strings.Index(logs, "GET "+u+" -> 200 OK"); at >= 0 {
			body = logs[at:]
		}
		if i+1 < len(urls) {
			body, _, _ = strings.Cut(body, "GET "+urls[i+1]+" -> ")
		}
		names := lavaMetricRE.FindAllStringSubmatch(body, -1)
		if len(names) == 0 {
			t.Errorf("lava-%s: %s: no Lava metric:\n%.300s", lavaServices[i], u, body)
			continue
		}
		fmt.Fprintf(&b, "\n  lava-%-8s %3d Lava metrics, e.g. %s", lavaServices[i], len(names), names[0][1])
	}
	t.Logf("/metrics through each Service:%s", b.String())
	l.e.kubectl(t, "-n", demoNS, "delete", "pod", "scrape")
}

// kitApplied waits until demo/kit is Applied at its current generation and checks the files:
// kit-GEN.txt holds "generation GEN", every generation's file was created exactly once (the
// provider's <file>.creates), the earlier generations' files are gone (replaced).
func (l *lifecycle) kitApplied(t *testing.T, timeout time.Duration) {
	t.Helper()
	e, ctx := l.e, t.Context()
	poll(t, timeout, "demo/kit not Applied at its generation", func() (bool, string) {
		out, _ := e.try(ctx, "kubectl", "-n", demoNS, "get", "lavaarchitecture/kit", "-o", "jsonpath={.metadata.generation} {.status.observedGeneration} {.status.phase} {.status.conditions[?(@.type==\"Ready\")].status} {.status.conditions[?(@.type==\"Ready\")].message}")
		f := strings.Fields(out)
		return len(f) >= 4 && f[0] == f[1] && f[2] == "Applied" && f[3] == "True", "generation, observed generation, phase, Ready: " + out
	})
	for g := 1; g <= l.gens; g++ {
		creates, err := os.ReadFile(filepath.Join(l.files, kitFile(g)+".creates"))
		if err != nil || strings.TrimSpace(string(creates)) != "1" {
			t.Errorf("%s created %q times (%v), want once", kitFile(g), strings.TrimSpace(string(creates)), err)
		}
		content, err := os.ReadFile(filepath.Join(l.files, kitFile(g)))
		switch {
		case g == l.gens && string(content) != fmt.Sprintf("generation %d\n", g):
			t.Errorf("%s: %q %v, want generation %d", kitFile(g), content, err, g)
		case g < l.gens && err == nil:
			t.Errorf("%s is still there after generation %d replaced it", kitFile(g), l.gens)
		}
	}
}

// nextGen patches the tenant's object to the next generation (as the tenant) and waits until
// it is Applied.
func (l *lifecycle) nextGen(t *testing.T) time.Duration {
	t.Helper()
	l.gens++
	start := time.Now()
	l.asTenant(t, "-n", demoNS, "patch", "lavaarchitecture/kit", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"bindings":{"gen":"%d","delay-ms":"0"}}}`, l.gens))
	l.kitApplied(t, 3*time.Minute)
	return time.Since(start)
}

// applierPods returns the names of the applier's pods that are not being deleted.
func (l *lifecycle) applierPods(t *testing.T) []string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
		} `json:"items"`
	}
	out := l.e.kubectl(t, "-n", releaseNS, "get", "pod", "-l", "app.kubernetes.io/instance=lava,app.kubernetes.io/component=applier", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("applier pods: %v", err)
	}
	var names []string
	for _, p := range list.Items {
		if p.Metadata.DeletionTimestamp == nil {
			names = append(names, "pod/"+p.Metadata.Name)
		}
	}
	return names
}

// applierDeleted deletes the applier's pod while the provider runs a create of the tenant's
// object (each held 20 s), twice: first as `kubectl delete pod` does (SIGTERM, the pod drains
// within its grace period), with hack/cluster/kit.yaml's first apply; then forced (--grace-period=0
// --force: the processes are killed mid-create) with the next generation. Each time the object
// reaches Applied and the file was created once.
func (l *lifecycle) applierDeleted(t *testing.T) {
	for _, force := range []bool{false, true} {
		l.deleteApplierMidCreate(t, force)
	}
}

// deleteApplierMidCreate applies the next generation with a 20 s create (the first: kubectl
// apply -f hack/cluster/kit.yaml), deletes the applier's pod once the provider has started the
// create (force: --grace-period=0 --force), and waits until the object is Applied.
func (l *lifecycle) deleteApplierMidCreate(t *testing.T, force bool) {
	e := l.e
	pods := l.applierPods(t)
	if len(pods) != 1 {
		t.Fatalf("applier pods %v, want one", pods)
	}
	// The pod's log until it ends: it is gone afterwards, and it may still apply while it drains.
	follow := exec.CommandContext(t.Context(), e.kubectlBin, "-n", releaseNS, "logs", "-f", pods[0])
	follow.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var goneLog strings.Builder
	follow.Stdout = &goneLog
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	l.gens++
	start := time.Now()
	if l.gens == 1 {
		l.asTenant(t, "apply", "-f", "hack/cluster/kit.yaml")
	} else {
		l.asTenant(t, "-n", demoNS, "patch", "lavaarchitecture/kit", "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"bindings":{"gen":"%d","delay-ms":"20000"}}}`, l.gens))
	}
	started := filepath.Join(l.files, kitFile(l.gens)+".create-started")
	poll(t, 2*time.Minute, "the provider never started the create of "+kitFile(l.gens), func() (bool, string) {
		_, err := os.Stat(started)
		return err == nil, fmt.Sprint(err)
	})
	_, err := os.Stat(filepath.Join(l.files, kitFile(l.gens)))
	del := []string{"-n", releaseNS, "delete", pods[0], "--wait=false"}
	if force {
		del = append(del, "--grace-period=0", "--force")
	}
	t.Logf("the create of %s started %s after the change (file written: %t); kubectl %s",
		kitFile(l.gens), time.Since(start).Round(time.Millisecond), err == nil, strings.Join(del, " "))
	deleted := time.Now()
	e.kubectl(t, del...)
	l.kitApplied(t, 4*time.Minute)
	t.Logf("demo/kit generation %d Applied %s after the delete", l.gens, time.Since(deleted).Round(time.Millisecond))
	if err := follow.Wait(); err != nil {
		t.Logf("kubectl logs -f %s: %v", pods[0], err)
	}
	l.goneLogs = append(l.goneLogs, goneLog.String())
	e.kubectl(t, "-n", releaseNS, "rollout", "status", "deployment/lava-applier", "--timeout=2m")
	if now := l.applierPods(t); len(now) != 1 || now[0] == pods[0] {
		t.Errorf("applier pods %v after deleting %s, want one other", now, pods[0])
	}
}

// tofuEngine applies hack/cluster/tofu.yaml (engine: tofu: the OpenTofu of the applier image)
// and reads the local_file it wrote on the file volume; deleted, the file is gone.
func (l *lifecycle) tofuEngine(t *testing.T) {
	e, ctx := l.e, t.Context()
	start := time.Now()
	e.kubectl(t, "apply", "-f", "hack/cluster/tofu.yaml")
	poll(t, 3*time.Minute, "demo/tofu-files not Applied", func() (bool, string) {
		out, _ := e.try(ctx, "kubectl", "-n", demoNS, "get", "lavaarchitecture/tofu-files", "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].message}`)
		return strings.HasPrefix(out, "Applied "), out
	})
	applied := time.Since(start)
	file := filepath.Join(l.files, "demo", "hello-from-tofu.txt")
	if b, err := os.ReadFile(file); err != nil || string(b) != "hello from tofu\n" {
		t.Errorf("%s: %q %v, want hello from tofu", file, b, err)
	}
	e.kubectl(t, "delete", "-f", "hack/cluster/tofu.yaml", "--wait", "--timeout=2m")
	if _, err := os.Stat(file); err == nil {
		t.Errorf("%s is still there after demo/tofu-files was deleted", file)
	}
	t.Logf("demo/tofu-files (engine tofu) Applied in %s, deleted (file removed) %s later", applied.Round(time.Millisecond), (time.Since(start) - applied).Round(time.Millisecond))
}

// natsPodDeleted deletes one NATS server's pod and applies the next generation meanwhile.
func (l *lifecycle) natsPodDeleted(t *testing.T) {
	e := l.e
	start := time.Now()
	e.kubectl(t, "-n", natsNS, "delete", "pod", "nats-2", "--wait=false")
	took := l.nextGen(t)
	t.Logf("generation %d Applied %s after kubectl delete pod nats-2 (applied in %s)", l.gens, time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
	e.kubectl(t, "-n", natsNS, "rollout", "status", "statefulset/nats", "--timeout=3m")
	t.Logf("nats-2 back, the 3 servers Ready %s after the delete", time.Since(start).Round(time.Millisecond))
}

// applierReplicas upgrades the release to 3 applier replicas and applies the next generation:
// one of them applies it, once.
func (l *lifecycle) applierReplicas(t *testing.T) {
	e := l.e
	start := time.Now()
	e.run(t, e.helm, "upgrade", "lava", "deploy/charts/lava", "-n", releaseNS, "-f", "hack/cluster/lava-values.yaml", "--set", "applier.replicas=3", "--wait", "--timeout=5m")
	e.kubectl(t, "-n", releaseNS, "rollout", "status", "deployment/lava-applier", "--timeout=2m")
	if pods := l.applierPods(t); len(pods) != 3 {
		t.Fatalf("applier pods after the upgrade: %v, want 3", pods)
	}
	t.Logf("helm upgrade --set applier.replicas=3 --wait: %s", time.Since(start).Round(time.Millisecond))
	took := l.nextGen(t)
	t.Logf("generation %d Applied with 3 appliers in %s", l.gens, took.Round(time.Millisecond))
}

// natsUnreachable cuts Lava off NATS: the NetworkPolicy of hack/cluster/nats.yaml loses its
// client rule, and the servers are restarted (SIGTERM to each server process on the node;
// the containers restart with their store) so the established connections end too. Every Lava
// pod's readiness goes false; the policy restored, every pod is Ready again and the next
// generation applies.
func (l *lifecycle) natsUnreachable(t *testing.T) {
	e := l.e
	e.kubectl(t, "-n", natsNS, "patch", "networkpolicy", "nats", "--type=json", "-p", `[{"op":"test","path":"/spec/ingress/0/ports/0/port","value":4222},{"op":"remove","path":"/spec/ingress/0"}]`)
	restored := false
	defer func() {
		if !restored {
			e.try(context.WithoutCancel(t.Context()), "kubectl", "apply", "-f", "hack/cluster/nats.yaml")
		}
	}()
	uids := strings.Fields(e.kubectl(t, "-n", natsNS, "get", "pod", "-l", "app.kubernetes.io/name=nats", "-o", "jsonpath={.items[*].metadata.uid}"))
	pids := processes(uids, "nats") // the image's /usr/local/bin/nats
	if len(pids) != 3 {
		t.Fatalf("nats server processes of the pods %v: %v, want 3", uids, pids)
	}
	start := time.Now()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM the nats server %d: %v", pid, err)
		}
	}
	e.kubectl(t, "-n", releaseNS, "wait", "--for=condition=Ready=false", "pod", "-l", "app.kubernetes.io/instance=lava", "--timeout=2m")
	t.Logf("NATS unreachable: every Lava pod not Ready %s after the servers stopped", time.Since(start).Round(time.Millisecond))
	var failing []string
	for line := range strings.Lines(e.kubectl(t, "-n", releaseNS, "get", "events", "--field-selector=reason=Unhealthy", "-o", "jsonpath={range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}")) {
		if strings.Contains(line, "statuscode: 503") && !slices.Contains(failing, line) {
			failing = append(failing, line)
		}
	}
	t.Logf("/readyz answered 503:\n%s", strings.Join(failing, ""))

	e.kubectl(t, "apply", "-f", "hack/cluster/nats.yaml")
	restored = true
	back := time.Now()
	e.kubectl(t, "-n", natsNS, "wait", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/name=nats", "--timeout=3m")
	e.kubectl(t, "-n", releaseNS, "wait", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/instance=lava", "--timeout=3m")
	t.Logf("policy restored: every Lava pod Ready again %s later", time.Since(back).Round(time.Millisecond))
	took := l.nextGen(t)
	t.Logf("generation %d Applied in %s", l.gens, took.Round(time.Millisecond))
}

// probeSummary is the probe's log without the bodies it printed, each line at most 160 bytes.
func probeSummary(logs string) string {
	var b strings.Builder
	for line := range strings.Lines(logs) {
		if strings.HasPrefix(line, "GET ") || strings.HasPrefix(line, "DIAL ") || strings.HasPrefix(line, "reached ") {
			fmt.Fprintf(&b, "%.160s\n", strings.TrimSuffix(line, "\n"))
		}
	}
	return b.String()
}

// processes returns the PIDs of the processes named name (/proc/PID/status) in the pods with
// the given UIDs (/proc/PID/cgroup).
func processes(uids []string, name string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, p := range procs {
		cg, err := os.ReadFile(filepath.Join(p, "cgroup"))
		if err != nil || !slices.ContainsFunc(uids, func(uid string) bool {
			return strings.Contains(string(cg), "pod"+uid) || strings.Contains(string(cg), "pod"+strings.ReplaceAll(uid, "-", "_"))
		}) {
			continue
		}
		if st, err := readStatus(filepath.Join(p, "status")); err != nil || st["Name"] != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// appliedOnce reads every applier's log (the running pods', their containers' previous runs,
// and the pods deleted mid-create) for the "applied" lines of demo/kit: one per generation, each
// with a state serial of its own, each adding one resource.
func (l *lifecycle) appliedOnce(t *testing.T) {
	logs := slices.Clone(l.goneLogs)
	for _, pod := range l.applierPods(t) {
		logs = append(logs, l.e.kubectl(t, "-n", releaseNS, "logs", pod))
		// A container that restarted: its previous run's log too.
		if prev, err := l.e.try(t.Context(), "kubectl", "-n", releaseNS, "logs", "--previous", pod); err == nil {
			logs = append(logs, prev)
		}
	}
	type applied struct {
		Msg      string `json:"msg"`
		Resource string `json:"resource"`
		Serial   int64  `json:"state_serial"`
		Add      int    `json:"add"`
	}
	var serials []int64
	for _, log := range logs {
		sc := bufio.NewScanner(strings.NewReader(log))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var a applied
			if json.Unmarshal(sc.Bytes(), &a) != nil || a.Msg != "applied" || a.Resource != demoNS+"/kit" {
				continue
			}
			serials = append(serials, a.Serial)
			if a.Add != 1 {
				t.Errorf("demo/kit applied with add %d (serial %d), want 1", a.Add, a.Serial)
			}
		}
	}
	slices.Sort(serials)
	if len(serials) != l.gens || len(slices.Compact(slices.Clone(serials))) != len(serials) {
		t.Errorf("demo/kit applied at state serials %v, want %d applies (one per generation) with distinct serials", serials, l.gens)
	}
	t.Logf("demo/kit: %d applies across the appliers, state serials %v", len(serials), serials)
}
