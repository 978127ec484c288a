// Package tofu is the engine for the OpenTofu and Terraform CLIs (one implementation for both
// binaries), built on hashicorp/terraform-exec and hashicorp/terraform-json.
//
// Every operation runs in a fresh workspace directory, rebuilt from the artifact store (the
// rendered JSON by digest, the saved plan file) and the state backend, and emptied afterwards,
// so nothing on a pod's disk matters and any replica can continue another's work. The
// workspace holds the rendered JSON unchanged as main.tf.json and an override file,
// lava_override.tf.json, with a `terraform` block: `required_providers` ([engine.Requirements])
// and the `http` backend, whose addresses (the applier's loopback [state.Handler]) and
// credentials come from TF_HTTP_* variables so that a saved plan names no replica. Providers come
// from a filesystem mirror through a CLI config file (linked straight from the mirror), or
// from what the CLI config names through a plugin cache shared by the process. The object's
// dependency lock (package providers, in the state store) is the workspace's
// .terraform.lock.hcl for plan and destroy, so the CLI enforces its versions and hashes; what
// a successful init selected is recorded in it.
//
// Plans and drift scans get a new workspace under WorkDir each. Applies and destroys run in
// the object's run directory, <WorkDir>/objects/<hash of the key>/run, under an flock on the
// object, and Lava starts their CLI itself rather than through terraform-exec: in a process
// group of its own, without the parent-death signal, its output in a file, so that a CLI whose
// applier dies finishes and writes its state (to errored.tfstate when the backend died with the
// applier). Every plan, apply and destroy of the object first waits for such an orphaned run
// (its pid and start time are recorded) and stores its errored.tfstate when that is safe, else
// keeps it aside as conflict-<time>.tfstate (docs/design/0019-tofu-apply-survives-a-dead-applier.md).
//
// Each CLI step runs under its timeout (Config.Timeouts, the engine.Timeouts the embedded
// engine shares); a step past it fails with a *engine.StepTimeoutError, an apply or destroy
// after SIGINT and engine.InterruptGrace (then SIGKILL).
package tofu
