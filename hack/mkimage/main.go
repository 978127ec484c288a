package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line (see the package documentation); the arguments left are
// the images to build.
func parseFlags(args []string, errw io.Writer) (options, error) {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(errw)
	o := options{prebuilt: map[string]string{}}
	fs.StringVar(&o.repo, "C", ".", "the repository's root directory")
	fs.StringVar(&o.out, "out", "bin/images", "directory of the image tarballs and images.txt")
	fs.StringVar(&o.registry, "registry", "ghcr.io/lava-operator", "registry and namespace of the images' references")
	fs.StringVar(&o.tag, "tag", "dev", "tag of the images' references")
	fs.StringVar(&o.version, "version", "", "org.opencontainers.image.version label (default: the image's tag)")
	fs.StringVar(&o.sourceURL, "source", "https://github.com/lava-operator/lava", "org.opencontainers.image.source label")
	fs.StringVar(&o.arch, "arch", "amd64", "GOARCH of the binaries and architecture of the images (the OS is linux)")
	fs.StringVar(&o.values, "values", "deploy/charts/lava/values.yaml", "chart values file with applier and drift providerDir and tofuBin (relative to -C)")
	fs.Func("providers", "a provider mirror directory (OpenTofu filesystem-mirror layout) for the applier and drift images (repeatable; merged)", func(s string) error {
		o.providers = append(o.providers, s)
		return nil
	})
	fs.StringVar(&o.tofu, "tofu", "", "OpenTofu binary for the applier and drift images (at the values' tofuBin, default "+defaultTofuBin+"); empty: none")
	fs.Func("coredns", "the CoreDNS binary of the coredns image (make tools-coredns)", func(s string) error {
		o.prebuilt["coredns"] = s
		return nil
	})
	fs.Func("nats", "the nats-server binary of the nats image (make tools-nats; static)", func(s string) error {
		o.prebuilt["nats"] = s
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(errw, "usage: mkimage [flags] [image[:tag]...]   (images: watcher synth applier drift viggy anomaly attest lava, the default;")
		fmt.Fprintln(errw, "       pause probe coredns nats, the one-node cluster's, only when named)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.names = fs.Args()
	if !filepath.IsAbs(o.values) {
		o.values = filepath.Join(o.repo, o.values)
	}
	return o, nil
}
