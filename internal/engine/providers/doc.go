// Package providers finds and installs Terraform providers as `tofu init` does: version
// selection by required_providers constraints (hashicorp/go-version), the dependency lock in
// the .terraform.lock.hcl format (hcl/v2, hclwrite), the Provider Registry Protocol (service
// discovery, versions, download with SHA256SUMS verified against its OpenPGP signature by
// github.com/ProtonMail/go-crypto/openpgp) and the Provider Network Mirror Protocol, into a
// shared on-disk cache in the unpacked filesystem-mirror layout. docs/embedded-engine.md
// ("Provider installation") describes the behaviour; docs/security.md ("Engines") the rules.
package providers
