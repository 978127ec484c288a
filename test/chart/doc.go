// Package chart checks the Helm chart in deploy/charts/lava and the rendered manifests in
// deploy/manifests: the CRD copies equal config/crd/bases, values.yaml, values.schema.json and
// the chart README agree, every service has a Dockerfile (tests without a build tag); and, with
// the integration tag, helm lint, helm template (default values, the ci/ values that turn every
// option on, values the schema must reject), the rendered default equals
// deploy/manifests/lava.yaml, the RBAC is the least privilege of docs/architecture.md section 2, every LAVA_*
// variable names a flag of its service, and the manifests pass a server-side dry-run apply on a
// real API server (envtest).
//
// Regenerate the chart README's values table and the rendered manifests with
//
//	go test -tags integration ./test/chart -update
//
// Helm comes from $LAVA_HELM_BIN (`make tools-helm`), kubectl and the API server from
// $KUBEBUILDER_ASSETS (`make tools-kube`).
package chart
