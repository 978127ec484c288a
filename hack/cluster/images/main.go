// Command images writes the images a one-node cluster (hack/cluster/up.sh) runs, as tarballs that
// `ctr -n k8s.io images import` reads: no registry, no container daemon. Each image is one layer
// holding a static binary, /etc/passwd, /etc/group and /tmp, with fixed timestamps, so the same
// binaries give the same image digest.
//
//	images -out DIR -pause BIN -probe BIN -coredns BIN
//
// writes DIR/pause.tar (the sandbox image, [PauseRef]), DIR/probe.tar (the smoke test's workload,
// [ProbeRef]) and DIR/coredns.tar ([CoreDNSRef]). up.sh names the same references.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The references the images are tagged with; hack/cluster/up.sh uses the same.
const (
	PauseRef   = "localhost/lava-node/pause:1"
	ProbeRef   = "localhost/lava-node/probe:1"
	CoreDNSRef = "localhost/lava-node/coredns:v1.14.7"
)

// spec is one single-binary image.
type spec struct {
	ref    string
	bin    string   // path of the binary on this machine
	target string   // its path in the image
	user   string   // uid:gid the image runs as unless the pod says otherwise
	cmd    []string // arguments after the entrypoint
}

func main() {
	out := flag.String("out", "", "directory the tarballs are written to")
	pause := flag.String("pause", "", "the pause binary (hack/cluster/images/pause)")
	probe := flag.String("probe", "", "the probe binary (hack/cluster/images/probe)")
	coredns := flag.String("coredns", "", "the coredns binary (hack/tools/build-coredns.sh)")
	flag.Parse()
	if *out == "" || *pause == "" || *probe == "" || *coredns == "" {
		fmt.Fprintln(os.Stderr, "usage: images -out DIR -pause BIN -probe BIN -coredns BIN")
		os.Exit(2)
	}
	specs := map[string]spec{
		"pause.tar":   {ref: PauseRef, bin: *pause, target: "/pause", user: "65535:65535"},
		"probe.tar":   {ref: ProbeRef, bin: *probe, target: "/probe", user: "65532:65532", cmd: []string{"serve"}},
		"coredns.tar": {ref: CoreDNSRef, bin: *coredns, target: "/coredns", user: "65532:65532"},
	}
	for file, s := range specs {
		digest, err := write(filepath.Join(*out, file), s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "images: %s: %v\n", file, err)
			os.Exit(1)
		}
		fmt.Printf("%s %s %s\n", file, s.ref, digest)
	}
}

// write builds the image s describes and writes it to path (written to path.tmp, then renamed).
func write(path string, s spec) (v1.Hash, error) {
	img, err := build(s)
	if err != nil {
		return v1.Hash{}, err
	}
	ref, err := name.NewTag(s.ref)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reference %s: %w", s.ref, err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.Write(ref, img, f); err != nil {
		f.Close()
		return v1.Hash{}, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// build assembles the one-layer image of s.
func build(s spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.bin)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(s.target, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = []string{s.target}
	cf.Config.Cmd = s.cmd
	cf.Config.Env = []string{"PATH=/"}
	cf.Config.User = s.user
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cf)
}

// layerTar returns the layer's tar stream: /etc/passwd and /etc/group naming the image's users,
// a world-writable /tmp, and the binary at target.
func layerTar(target string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(0, 0).UTC()
	entries := []struct {
		name string
		mode int64
		body []byte // nil for a directory
	}{
		{"etc/", 0o755, nil},
		{"tmp/", 0o1777, nil},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/:/nonexistent\nnonroot:x:65532:65532:nonroot:/:/nonexistent\nnobody:x:65535:65535:nobody:/:/nonexistent\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\nnobody:x:65535:\n")},
		{strings.TrimPrefix(target, "/"), 0o755, bin},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mt, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.body == nil {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
