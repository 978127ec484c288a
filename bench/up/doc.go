// Package up benchmarks the main job, `lava up --once` on one manifest, side by side with an
// operator running OpenTofu by hand on the same Terraform JSON (bench/README.md). Run it with
// `go test -tags integration -run '^$' -bench UpOnce ./bench/up/`.
package up
