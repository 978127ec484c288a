// Package svc holds what every Lava service binary shares: common flags, configuration from
// LAVA_* env, exit codes, and the run scaffolding.
package svc
