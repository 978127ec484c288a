//go:build !linux

package up

// runnerUIDInUse finds nothing outside Linux, where lava up runs no provider runners.
func runnerUIDInUse(int) error { return nil }
