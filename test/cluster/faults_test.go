//go:build cluster

package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// example is one file of examples/ as TestCluster_chart applies it: its objects in demo and the
// files they write under demo's directory of the file volume, with their content.
type example struct {
	file    string
	objects []string
	files   map[string]string
	// destroyed is the count of Terraform resources the applier logs destroying, per object.
	destroyed map[string]int
}

// clusterExamples are the files of examples/ TestCluster_chart applies after examples/notes.yaml
// (the first one it applies): every other one but cloud/'s, which need cloud providers.
var clusterExamples = []example{
	{file: "examples/local-files.yaml", objects: []string{"greetings"},
		files:     map[string]string{"hello-ana.txt": "hello ana\n", "hello-bo.txt": "hello bo\n"},
		destroyed: map[string]int{"demo/greetings": 3}},
	{file: "examples/testkit.yaml", objects: []string{"testkit-files"},
		files:     map[string]string{"kit.txt": "made by example/testkit\n", "kit-readme.txt": "kit.txt was written by the testkit provider\n"},
		destroyed: map[string]int{"demo/testkit-files": 2}},
	{file: "examples/tofu-files.yaml", objects: []string{"tofu-greetings"},
		files:     map[string]string{"hello-from-tofu.txt": "hello from tofu\n"},
		destroyed: map[string]int{"demo/tofu-greetings": 2}},
}

// exampleRoot is the directory the examples bind `dir` to under lava up, and the one of demo
// on the cluster's file volume (policy.namespaces.demo.fileWriteRoots in
// hack/cluster/lava-values.yaml), which they are bound to there.
const (
	exampleRoot = "/tmp/lava-demo/demo"
	volumeRoot  = "/var/lib/lava-files/demo"
)

// examples applies each of clusterExamples as docs/install.md says (its `dir` bound to demo's
// root on the file volume), all at once, waits until every object is Ready, reads the files
// they wrote on the node, deletes them and checks that the objects are gone (finalizer
// removed), their files too, and that the applier destroyed every resource.
func (l *lifecycle) examples(t *testing.T) {
	e, ctx := l.e, t.Context()
	start := time.Now()
	var objs []string
	for _, ex := range clusterExamples {
		raw, err := os.ReadFile(filepath.Join(e.repo, ex.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "dir: "+exampleRoot+"\n") {
			t.Fatalf("%s binds no dir: %s: the cluster applies it with dir %s", ex.file, exampleRoot, volumeRoot)
		}
		manifest := filepath.Join(t.TempDir(), filepath.Base(ex.file))
		writeFile(t, manifest, strings.ReplaceAll(string(raw), exampleRoot, volumeRoot), 0o644)
		e.kubectl(t, "apply", "-f", manifest)
		for _, o := range ex.objects {
			objs = append(objs, "lavaarchitecture/"+o)
		}
	}
	if out, err := e.try(ctx, "kubectl", append([]string{"-n", demoNS, "wait", "--for=condition=Ready", "--timeout=3m"}, objs...)...); err != nil {
		status, _ := e.try(ctx, "kubectl", append([]string{"-n", demoNS, "get", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.conditions[?(@.type=="Ready")].reason}: {.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`}, objs...)...)
		t.Fatalf("examples not Ready: %v\n%s\n%s", err, out, status)
	}
	ready := time.Since(start)
	for _, o := range objs {
		if phase := e.kubectl(t, "-n", demoNS, "get", o, "-o", "jsonpath={.status.phase}"); phase != "Applied" {
			t.Errorf("%s: phase %q, want Applied", o, phase)
		}
	}
	for _, ex := range clusterExamples {
		for name, want := range ex.files {
			p := filepath.Join(l.files, demoNS, name)
			if b, err := os.ReadFile(p); err != nil || string(b) != want {
				t.Errorf("%s: %s: %q %v, want %q", ex.file, p, b, err, want)
			}
		}
	}
	start = time.Now()
	destroyed := map[string]int{}
	for _, ex := range clusterExamples {
		e.kubectl(t, "delete", "-f", ex.file, "--wait", "--timeout=2m")
		for r, n := range ex.destroyed {
			destroyed[r] = n
		}
	}
	if out, err := e.try(ctx, "kubectl", append([]string{"-n", demoNS, "get", "--ignore-not-found", "-o", "name"}, objs...)...); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("after kubectl delete: %q %v, want every example object gone (finalizer removed)", out, err)
	}
	for _, ex := range clusterExamples {
		for name := range ex.files {
			if _, err := os.Stat(filepath.Join(l.files, demoNS, name)); err == nil {
				t.Errorf("%s: %s is still there after the object was deleted", ex.file, name)
			}
		}
	}
	e.checkDestroyed(t, destroyed)
	t.Logf("%d example objects Ready in %s; deleted, files removed, in %s", len(objs), ready.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// events returns the messages of the Events of reason in ns, "OBJECT: MESSAGE" per line.
func (e *chartEnv) events(t *testing.T, ns, reason string) string {
	t.Helper()
	return e.kubectl(t, "-n", ns, "get", "events", "--field-selector=reason="+reason,
		"-o", `jsonpath={range .items[*]}{.involvedObject.name}: {.message}{"\n"}{end}`)
}

// imageMissing upgrades the release with viggy's image tag one that was never imported: the
// upgrade fails (--wait) naming the Deployment that is not ready, the release is failed, the
// new pod's Event (ErrImageNeverPull) names the image, and the old pod keeps running; helm
// rollback restores it.
func (l *lifecycle) imageMissing(t *testing.T) {
	e, ctx := l.e, t.Context()
	start := time.Now()
	out, err := e.try(ctx, e.helm, "upgrade", "lava", "deploy/charts/lava", "-n", releaseNS, "-f", "hack/cluster/lava-values.yaml",
		"--set", "viggy.image.tag=missing", "--wait", "--timeout=20s", "--debug")
	notReady := "Deployment is not ready: " + releaseNS + "/lava-viggy"
	if err == nil || !strings.Contains(out, notReady) {
		t.Errorf("helm upgrade with viggy's image missing: %v, want it failed, its output naming %q:\n%.2000s", err, notReady, lastLines(out, 20))
	}
	if status := e.run(t, e.helm, "status", "lava", "-n", releaseNS); !strings.Contains(status, "STATUS: failed") {
		t.Errorf("helm status after the failed upgrade:\n%s\nwant STATUS: failed", status)
	}
	image := `"ghcr.io/lava-operator/lava-viggy:missing" is not present with pull policy of Never`
	var msg string
	poll(t, time.Minute, "no ErrImageNeverPull Event naming the image", func() (bool, string) {
		ev := e.events(t, releaseNS, "ErrImageNeverPull")
		for line := range strings.Lines(ev) {
			if strings.Contains(line, image) {
				msg = strings.TrimSpace(line)
				return true, ev
			}
		}
		return false, ev
	})
	t.Logf("viggy's image missing: helm upgrade --wait failed after %s (%s); Event ErrImageNeverPull: %s",
		time.Since(start).Round(time.Millisecond), notReady, msg)
	e.run(t, e.helm, "rollback", "lava", "-n", releaseNS, "--wait", "--timeout=2m")
	e.kubectl(t, "-n", releaseNS, "rollout", "status", "deployment/lava-viggy", "--timeout=2m")
}

// secretMissing deletes viggy's nkey Secret and its pod: the next pod stays ContainerCreating
// with a FailedMount Event naming the Secret; the Secret created again, the pod becomes Ready.
func (l *lifecycle) secretMissing(t *testing.T) {
	e := l.e
	start := time.Now()
	e.kubectl(t, "-n", releaseNS, "delete", "secret", "lava-nats-viggy")
	e.kubectl(t, "-n", releaseNS, "delete", "pod", "-l", "app.kubernetes.io/component=viggy", "--wait=false")
	want := `MountVolume.SetUp failed for volume "nats-nkey" : secret "lava-nats-viggy" not found`
	var msg string
	poll(t, 2*time.Minute, "no FailedMount Event naming the Secret lava-nats-viggy", func() (bool, string) {
		ev := e.events(t, releaseNS, "FailedMount")
		for line := range strings.Lines(ev) {
			if strings.HasPrefix(line, "lava-viggy-") && strings.Contains(line, want) {
				msg = strings.TrimSpace(line)
				return true, ev
			}
		}
		return false, ev
	})
	t.Logf("viggy's Secret deleted: Event FailedMount %s after: %s", time.Since(start).Round(time.Millisecond), msg)
	restored := time.Now()
	e.kubectl(t, "-n", releaseNS, "create", "secret", "generic", "lava-nats-viggy", "--from-file=nkey="+filepath.Join(l.creds, "viggy.nk"))
	e.kubectl(t, "-n", releaseNS, "rollout", "status", "deployment/lava-viggy", "--timeout=3m")
	t.Logf("the Secret created again: lava-viggy Ready %s later", time.Since(restored).Round(time.Millisecond))
}

// bootstrapFails upgrades the release with a NATS URL no server answers at (the bootstrap
// Job's --timeout 10s, no retry): the Job fails, its log names the URL and why, and helm upgrade
// fails naming the Job. The services keep running (a pre-upgrade hook fails before anything
// else changes). The next helm upgrade (topologyMissing) restores it.
func (l *lifecycle) bootstrapFails(t *testing.T) {
	e, ctx := l.e, t.Context()
	start := time.Now()
	url := "tls://nats-missing." + natsNS + ".svc:4222"
	out, err := e.try(ctx, e.helm, "upgrade", "lava", "deploy/charts/lava", "-n", releaseNS, "-f", "hack/cluster/lava-values.yaml",
		"--set", "nats.url="+url, "--set", "bootstrap.timeout=10s", "--set", "bootstrap.backoffLimit=0", "--wait", "--timeout=2m")
	if err == nil || !strings.Contains(out, "job lava-bootstrap failed: BackoffLimitExceeded") {
		t.Errorf("helm upgrade with a wrong NATS URL: %v, want it failed naming the Job:\n%s", err, out)
	}
	log := e.kubectl(t, "-n", releaseNS, "logs", "job/lava-bootstrap")
	want := "lava: no NATS server at " + url + " (URL from $LAVA_NATS_URL): bus: connect to " + url + ": no server answered within 10s: "
	lookup := "dial tcp: lookup nats-missing." + natsNS + ".svc"
	if !strings.Contains(log, want+lookup) {
		t.Errorf("the bootstrap Job's log:\n%s\nwant %q", log, want+lookup)
	}
	e.kubectl(t, "-n", releaseNS, "wait", "--for=condition=Ready", "pod", "-l", "app.kubernetes.io/instance=lava,app.kubernetes.io/component!=bootstrap", "--timeout=1m")
	t.Logf("a wrong NATS URL: helm upgrade failed after %s: %s; the Job's log:\n%s",
		time.Since(start).Round(time.Millisecond), strings.TrimSpace(lastLines(out, 2)), strings.TrimSpace(log))
}

// topologyMissing restarts NATS with an empty store (every server's pod deleted: the store is
// an emptyDir) so no stream, consumer or bucket exists: every Lava pod's readiness goes false,
// and each service exits with a line naming what it misses (bus: topology missing ...), before
// each restart too, never a restart without it. helm upgrade (the bootstrap hook Job: the
// topology again, with the right URL after bootstrapFails) and a rollout restart bring every
// pod back to Ready, and examples/notes.yaml applies.
func (l *lifecycle) topologyMissing(t *testing.T) {
	e, ctx := l.e, t.Context()
	start := time.Now()
	e.kubectl(t, "-n", natsNS, "delete", "pod", "-l", "app.kubernetes.io/name=nats", "--wait=false")
	e.kubectl(t, "-n", natsNS, "rollout", "status", "statefulset/nats", "--timeout=3m")
	t.Logf("NATS restarted with an empty store: the 3 servers Ready %s after the delete", time.Since(start).Round(time.Millisecond))
	services := "app.kubernetes.io/instance=lava,app.kubernetes.io/component!=bootstrap"
	e.kubectl(t, "-n", releaseNS, "wait", "--for=condition=Ready=false", "pod", "-l", services, "--timeout=2m")
	t.Logf("every Lava pod not Ready %s after the delete", time.Since(start).Round(time.Millisecond))
	lines := map[string]string{}
	poll(t, 2*time.Minute, "a service without a line naming the missing topology", func() (bool, string) {
		for _, svc := range lavaServices {
			if _, ok := lines[svc]; ok {
				continue
			}
			var log string
			for _, prev := range []string{"--previous=false", "--previous=true"} {
				out, _ := e.try(ctx, "kubectl", "-n", releaseNS, "logs", "deploy/lava-"+svc, prev, "--tail=5")
				log += out
			}
			for line := range strings.Lines(log) {
				if strings.HasPrefix(line, svc+": bus: topology missing (run `lava nats bootstrap` with the bootstrap identity): ") {
					lines[svc] = strings.TrimSpace(line)
				}
			}
		}
		return len(lines) == len(lavaServices), fmt.Sprint(lines)
	})
	// Each restart of a Lava container ended with such a line: its last run's log says why. That
	// run is the container's current one while it waits to restart (CrashLoopBackOff; the kubelet
	// may have removed the one before, which --previous asks for), else its previous one.
	for line := range strings.Lines(e.kubectl(t, "-n", releaseNS, "get", "pod", "-l", services, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].restartCount}{"\n"}{end}`)) {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] == "0" {
			continue
		}
		var logs string
		for _, prev := range []string{"--previous=false", "--previous=true"} {
			out, _ := e.try(ctx, "kubectl", "-n", releaseNS, "logs", "pod/"+f[0], prev, "--tail=3")
			logs += out
		}
		if !strings.Contains(logs, ": bus: ") {
			t.Errorf("%s restarted %s times; its last run's log ends without saying why:\n%s", f[0], f[1], logs)
		}
	}
	var b strings.Builder
	for _, svc := range lavaServices {
		fmt.Fprintf(&b, "\n  %.400s", lines[svc])
	}
	t.Logf("each service names what is missing (%s after the delete):%s", time.Since(start).Round(time.Millisecond), b.String())

	restored := time.Now()
	e.run(t, e.helm, "upgrade", "lava", "deploy/charts/lava", "-n", releaseNS, "-f", "hack/cluster/lava-values.yaml", "--timeout=5m")
	e.kubectl(t, "-n", releaseNS, "rollout", "restart", "deployment", "-l", "app.kubernetes.io/instance=lava")
	for _, svc := range lavaServices {
		e.kubectl(t, "-n", releaseNS, "rollout", "status", "deployment/lava-"+svc, "--timeout=3m")
	}
	e.checkTopology(t)
	t.Logf("helm upgrade (the hook bootstraps) and a rollout restart: every Lava pod Ready %s later", time.Since(restored).Round(time.Millisecond))
	objs := []string{"lavaarchitecture/release-notes", "lavaarchitecture/team-roster"}
	e.kubectl(t, "apply", "-f", "examples/notes.yaml")
	e.kubectl(t, append([]string{"-n", demoNS, "wait", "--for=condition=Ready", "--timeout=3m"}, objs...)...)
	e.kubectl(t, "delete", "-f", "examples/notes.yaml", "--wait", "--timeout=2m")
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
