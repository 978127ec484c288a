package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// target is one image: a binary and what goes with it.
type target struct {
	// name names the target on the command line.
	name string
	// image is the image's repository name, below -registry: lava-<service>, lava for the
	// CLI, the name itself for the one-node cluster's images.
	image string
	// module is the directory of the Go module the binary is built in, relative to the
	// repository; pkg is the package within it. pkg is empty for a binary built elsewhere,
	// which the flag named after the target gives (-coredns, -nats).
	module, pkg string
	// ports are the container ports the image declares.
	ports []string
	// engine marks the applier and drift: they carry the provider mirror (and OpenTofu when
	// it is given).
	engine bool
	// node marks an image of the one-node cluster (hack/cluster/up.sh): built only when named.
	node bool
	// user is the uid:gid the image runs as unless a pod says otherwise; empty: imageUser.
	user string
	// cmd is the image's default arguments after the entrypoint.
	cmd []string
	// tag, when set, replaces -tag in the image's reference (the argument NAME:TAG).
	tag string
}

// binary is where the image holds the binary, its entrypoint.
func (t target) binary() string { return "/usr/local/bin/" + t.image }

// targets returns every image, in the order mkimage builds them: the services (each its own
// module under services/, built with GOWORK=off as a release is), the CLI, and the images of
// the one-node cluster: pause (the pod sandbox; as 65535:65535, the user of Kubernetes' own
// pause image), probe (the smoke test's workload, `probe serve` by default), coredns
// (CoreDNS, built by hack/tools/build-coredns.sh) and nats (nats-server, the cached binary of
// make tools-nats; hack/cluster/nats.yaml runs it with the configuration as its argument).
func targets() []target {
	metrics := []string{"9090/tcp", "9091/tcp"}
	connect := []string{"8080/tcp", "9090/tcp", "9091/tcp"}
	svc := func(name string, ports []string, engine bool) target {
		return target{name: name, image: "lava-" + name, module: "services/" + name, pkg: ".", ports: ports, engine: engine}
	}
	return []target{
		svc("watcher", metrics, false),
		svc("synth", connect, false),
		svc("applier", metrics, true),
		svc("drift", metrics, true),
		svc("viggy", metrics, false),
		svc("anomaly", metrics, false),
		svc("attest", connect, false),
		{name: "lava", image: "lava", module: ".", pkg: "./cmd/lava"},
		{name: "pause", image: "pause", module: ".", pkg: "./hack/cluster/pause", node: true, user: "65535:65535"},
		{name: "probe", image: "probe", module: ".", pkg: "./hack/cluster/probe", node: true, cmd: []string{"serve"}},
		{name: "coredns", image: "coredns", node: true},
		{name: "nats", image: "nats", node: true, ports: []string{"4222/tcp", "6222/tcp", "8222/tcp"}},
	}
}

// goBuild builds t's binary into out: static (CGO_ENABLED=0), for linux/arch, with -trimpath
// and no VCS stamp so that the same commit builds the same bytes, and without symbols (the
// Dockerfiles' -ldflags="-s -w"). The module is built on its own (GOWORK=off), from its own
// go.mod and go.sum. The environment's GOFLAGS (for example -p=1) still applies.
func goBuild(ctx context.Context, repo string, t target, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, t.pkg)
	cmd.Dir = filepath.Join(repo, t.module)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", t.pkg, t.module, err, stderr.Bytes())
	}
	return nil
}

// binaryOf returns the host file of t's binary: built into dir by goBuild, or, for a target
// without a package, the file o.prebuilt holds for it.
func binaryOf(ctx context.Context, o options, t target, dir string) (string, error) {
	if t.pkg == "" {
		p := o.prebuilt[t.name]
		if p == "" {
			return "", fmt.Errorf("no binary: give it with -%s", t.name)
		}
		return p, nil
	}
	bin := filepath.Join(dir, t.image)
	return bin, goBuild(ctx, o.repo, t, o.arch, bin)
}

// sourceInfo is what the images' labels and timestamps say about the source.
type sourceInfo struct {
	// revision is the commit, with "-dirty" appended when the work tree has changes.
	revision string
	// created is the time of every file and of the image: SOURCE_DATE_EPOCH when set, else
	// the commit's time.
	created time.Time
}

// readSource asks git in repo for the commit and its time.
func readSource(ctx context.Context, repo string) (sourceInfo, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var s sourceInfo
	rev, err := git("rev-parse", "HEAD")
	if err != nil {
		return s, err
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return s, err
	}
	s.revision = rev
	if status != "" {
		s.revision += "-dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("source date epoch %q: %w", epoch, err)
	}
	s.created = time.Unix(sec, 0).UTC()
	return s, nil
}

// engineValues are the chart's values of the applier and drift that decide where their image
// holds the provider mirror and OpenTofu.
type engineValues struct {
	// ProviderDir is where the service reads the provider mirror (LAVA_PROVIDER_DIR).
	ProviderDir string `yaml:"providerDir"`
	// TofuBin is the OpenTofu binary the service runs (LAVA_TOFU_BIN); empty: engine tofu off.
	TofuBin string `yaml:"tofuBin"`
}

// defaultTofuBin is where an image holds OpenTofu when the values set no tofuBin: the path
// docs/install.md tells to set applier.tofuBin and drift.tofuBin to.
const defaultTofuBin = "/usr/local/tofu/tofu"

// readValues reads the applier's and drift's engineValues from the chart values file at p.
func readValues(p string) (map[string]engineValues, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var v struct {
		Applier engineValues `yaml:"applier"`
		Drift   engineValues `yaml:"drift"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	out := map[string]engineValues{"applier": v.Applier, "drift": v.Drift}
	for svc, ev := range out {
		if !path.IsAbs(ev.ProviderDir) || path.Clean(ev.ProviderDir) != ev.ProviderDir || ev.ProviderDir == "/" {
			return nil, fmt.Errorf("%s: %s.providerDir %q is not an absolute clean path below /", p, svc, ev.ProviderDir)
		}
		if ev.TofuBin == "" {
			ev.TofuBin = defaultTofuBin
		}
		if !path.IsAbs(ev.TofuBin) || path.Clean(ev.TofuBin) != ev.TofuBin {
			return nil, fmt.Errorf("%s: %s.tofuBin %q is not an absolute clean path", p, svc, ev.TofuBin)
		}
		out[svc] = ev
	}
	return out, nil
}
