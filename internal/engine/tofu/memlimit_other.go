//go:build !linux

package tofu

import "errors"

// limitSupported: elsewhere RLIMIT_DATA does not cover mmap, so the CLI runs unbounded.
const limitSupported = false

func limitedExec(string, uint64, uint64) error { return errors.New("no memory limit on this platform") }
