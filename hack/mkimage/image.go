package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The user the images run as (all but pause): distroless's nonroot, the user the chart's
// securityContext expects (runAsNonRoot needs a numeric user).
const (
	nonrootUID = 65532
	imageUser  = "65532:65532"
	homeDir    = "/home/nonroot"
)

// options are what one run of mkimage builds, and where.
type options struct {
	// repo is the repository's root directory.
	repo string
	// out is the directory the image tarballs and images.txt are written to.
	out string
	// registry and tag make each image's reference: <registry>/<image>:<tag> (a target's own
	// tag replaces tag).
	registry, tag string
	// version is the org.opencontainers.image.version label; empty: the image's tag.
	version string
	// sourceURL is the org.opencontainers.image.source label.
	sourceURL string
	// arch is the GOARCH of the binaries and the images' architecture (the OS is linux).
	arch string
	// values is the chart values file the applier's and drift's providerDir and tofuBin are
	// read from.
	values string
	// providers are provider mirror directories (OpenTofu's filesystem-mirror layout), merged
	// into the applier's and drift's providerDir.
	providers []string
	// tofu is the OpenTofu binary copied into the applier and drift images; empty: none.
	tofu string
	// prebuilt are the binaries of the targets mkimage does not build, by target name
	// (coredns: -coredns).
	prebuilt map[string]string
	// names are the images to build (target names, each optionally NAME:TAG); empty: every
	// image but the one-node cluster's.
	names []string
}

// built is one image written by run: a line of images.txt.
type built struct {
	ref    string
	digest v1.Hash // the manifest's digest, what a registry serves the image as
	id     v1.Hash // the config's digest, the image ID a runtime shows
	file   string  // the tarball, relative to options.out
}

// shared are the layers several images hold, each made once per run.
type shared struct {
	work    string
	created time.Time
	base    v1.Layer
	// mirrors and tofu are by path in the image.
	mirrors, tofu map[string]v1.Layer
}

// run builds the images o names into o.out and writes o.out/images.txt, printing progress to
// logw.
func run(ctx context.Context, o options, logw io.Writer) ([]built, error) {
	selected, err := selectTargets(o.names)
	if err != nil {
		return nil, err
	}
	src, err := readSource(ctx, o.repo)
	if err != nil {
		return nil, err
	}
	values, err := readValues(o.values)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(o.out, ".work-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	ca, roots, err := caBundle()
	if err != nil {
		return nil, err
	}
	s := &shared{work: work, created: src.created, mirrors: map[string]v1.Layer{}, tofu: map[string]v1.Layer{}}
	base, err := baseTree(ca)
	if err != nil {
		return nil, err
	}
	if s.base, err = base.layer(work, src.created); err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	fmt.Fprintf(logw, "[images] revision %s, created %s, %d CA roots\n", src.revision, src.created.Format(time.RFC3339), roots)
	var out []built
	for _, t := range selected {
		start := time.Now()
		b, err := buildOne(ctx, o, t, src, values[t.name], s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.image, err)
		}
		fmt.Fprintf(logw, "[images] %s %s (%s, %s)\n", b.ref, b.digest, b.file, time.Since(start).Round(time.Second))
		out = append(out, b)
	}
	return out, writeList(filepath.Join(o.out, "images.txt"), out)
}

// selectTargets returns the targets to build, in build order: each name is a target's, or
// NAME:TAG to give that image TAG instead of -tag. Without names, every target but the
// one-node cluster's.
func selectTargets(names []string) ([]target, error) {
	all := targets()
	var known []string
	for _, t := range all {
		known = append(known, t.name)
	}
	tags := map[string]string{}
	for _, n := range names {
		name, tag, hasTag := strings.Cut(n, ":")
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("no image %q (images: %s)", name, strings.Join(known, " "))
		}
		if hasTag && tag == "" {
			return nil, fmt.Errorf("image %q: empty tag", n)
		}
		tags[name] = tag
	}
	var out []target
	for _, t := range all {
		tag, named := tags[t.name]
		if named || (len(names) == 0 && !t.node) {
			t.tag = tag
			out = append(out, t)
		}
	}
	return out, nil
}

// baseTree is the first layer of every image: the nonroot user, the CA certificates, a
// writable /tmp (mode 1777) and the user's home.
func baseTree(ca []byte) (tree, error) {
	t := tree{}
	for _, e := range []entry{
		{path: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{path: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: caBundlePath, mode: 0o644, data: ca},
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: homeDir, dir: true, mode: 0o700, uid: nonrootUID, gid: nonrootUID},
	} {
		if err := t.add(e); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// buildOne builds t's binary and its image, and writes the image's tarball.
func buildOne(ctx context.Context, o options, t target, src sourceInfo, ev engineValues, s *shared) (built, error) {
	var b built
	ref, err := name.NewTag(o.registry + "/" + t.image + ":" + imageTag(o, t))
	if err != nil {
		return b, err
	}
	bin, err := binaryOf(ctx, o, t, s.work)
	if err != nil {
		return b, err
	}
	binTree := tree{}
	if err := binTree.add(entry{path: t.binary(), src: bin, mode: 0o755}); err != nil {
		return b, err
	}
	binLayer, err := binTree.layer(s.work, s.created)
	if err != nil {
		return b, err
	}
	adds := []mutate.Addendum{{Layer: s.base, History: history(s.created, "base: nonroot user, CA certificates, /tmp")}}
	if t.engine {
		more, err := engineLayers(o, ev, s)
		if err != nil {
			return b, err
		}
		adds = append(adds, more...)
	}
	adds = append(adds, mutate.Addendum{Layer: binLayer, History: history(s.created, "binary "+t.binary())})
	img, err := assemble(adds, t, o, src)
	if err != nil {
		return b, err
	}
	return write(o.out, ref, img)
}

// engineLayers are the applier's and drift's layers besides the base and the binary: the
// provider mirror at the values' providerDir (an empty directory without mirrors), and
// OpenTofu at tofuBin when o.tofu is set.
func engineLayers(o options, ev engineValues, s *shared) ([]mutate.Addendum, error) {
	mirror, ok := s.mirrors[ev.ProviderDir]
	if !ok {
		t := tree{}
		if err := t.add(entry{path: ev.ProviderDir, dir: true, mode: 0o755}); err != nil {
			return nil, err
		}
		for _, dir := range o.providers {
			if err := t.addDir(dir, ev.ProviderDir); err != nil {
				return nil, fmt.Errorf("provider mirror: %w", err)
			}
		}
		var err error
		if mirror, err = t.layer(s.work, s.created); err != nil {
			return nil, err
		}
		s.mirrors[ev.ProviderDir] = mirror
	}
	adds := []mutate.Addendum{{Layer: mirror, History: history(s.created, "provider mirror "+ev.ProviderDir)}}
	if o.tofu == "" {
		return adds, nil
	}
	tofu, ok := s.tofu[ev.TofuBin]
	if !ok {
		t := tree{}
		if err := t.add(entry{path: ev.TofuBin, src: o.tofu, mode: 0o755}); err != nil {
			return nil, err
		}
		var err error
		if tofu, err = t.layer(s.work, s.created); err != nil {
			return nil, fmt.Errorf("OpenTofu: %w", err)
		}
		s.tofu[ev.TofuBin] = tofu
	}
	return append(adds, mutate.Addendum{Layer: tofu, History: history(s.created, "OpenTofu "+ev.TofuBin)}), nil
}

// history is a layer's history entry: what made it, at the source's time.
func history(created time.Time, what string) v1.History {
	return v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/mkimage: " + what}
}

// imageTag is the tag of t's image: its own, else o.tag.
func imageTag(o options, t target) string {
	if t.tag != "" {
		return t.tag
	}
	return o.tag
}

// assemble stacks the layers on an empty image and sets its configuration: linux/o.arch, t's
// user (the nonroot user unless t says), the binary as entrypoint with t's arguments, t's ports
// and the OCI labels, every time the source's.
func assemble(adds []mutate.Addendum, t target, o options, src sourceInfo) (v1.Image, error) {
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: src.created}
	user, version := t.user, o.version
	if user == "" {
		user = imageUser
	}
	if version == "" {
		version = imageTag(o, t)
	}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{t.binary()},
		Cmd:        t.cmd,
		WorkingDir: homeDir,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=" + caBundlePath,
		},
		Labels: map[string]string{
			"org.opencontainers.image.source":   o.sourceURL,
			"org.opencontainers.image.revision": src.revision,
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.created":  src.created.Format(time.RFC3339),
			"org.opencontainers.image.title":    t.image,
		},
	}
	if len(t.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range t.ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// write writes img as a docker-save tarball tagged ref (go-containerregistry's tarball format,
// which `ctr images import`, `docker load` and `crane push` read) to dir/<image>.tar.
func write(dir string, ref name.Tag, img v1.Image) (built, error) {
	b := built{ref: ref.String(), file: filepath.Base(ref.RepositoryStr()) + ".tar"}
	var err error
	if b.digest, err = img.Digest(); err != nil {
		return b, err
	}
	if b.id, err = img.ConfigName(); err != nil {
		return b, err
	}
	tmp := filepath.Join(dir, "."+b.file+".tmp")
	if err := tarball.MultiRefWriteToFile(tmp, map[name.Reference]v1.Image{ref: img}); err != nil {
		os.Remove(tmp)
		return b, err
	}
	return b, os.Rename(tmp, filepath.Join(dir, b.file))
}

// writeList writes images.txt: one line per image, sorted, "REF DIGEST ID FILE".
func writeList(p string, bs []built) error {
	lines := make([]string, 0, len(bs))
	for _, b := range bs {
		lines = append(lines, fmt.Sprintf("%s %s %s %s\n", b.ref, b.digest, b.id, b.file))
	}
	slices.Sort(lines)
	return os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644)
}
