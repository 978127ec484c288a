//go:build !linux

package runner

import "errors"

// refuseMPTCP has no filter to install outside Linux: runners need Linux.
func refuseMPTCP() error { return errors.New("runner: seccomp needs Linux") }
