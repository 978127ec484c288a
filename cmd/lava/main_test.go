package main

import (
	"context"
	"os"
	"testing"
)

// TestMain runs the test binary as `lava runner` when lava up, in a test, starts it as its
// provider runner (its own executable with the argument "runner"); otherwise the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
