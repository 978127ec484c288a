// Package tofutest gives tests the real OpenTofu tool directory built by `make tools-tofu`
// (binary, filesystem provider mirror, CLI config), the Terraform binary of
// `make tools-terraform`, and an in-process JetStream server (natstest) with the artifact
// store (bus) over its object store, for the engine and state tests.
package tofutest
