//go:build tools

// Package deps pins the third-party modules the milestone's packages use, so that every package
// can be written against one agreed go.mod while those packages are still being built. It is
// never compiled (build tag "tools"); `go mod tidy` reads its imports. Remove an import from here
// once a real package imports it.
package deps

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/gowebpki/jcs"
	_ "github.com/hashicorp/go-plugin"
	_ "github.com/hashicorp/terraform-exec/tfexec"
	_ "github.com/hashicorp/terraform-json"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil/promlint"
	_ "github.com/spf13/cobra"
	_ "github.com/zclconf/go-cty/cty"
	_ "golang.org/x/sync/errgroup"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "lukechampine.com/blake3"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
