package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cost is what this process spent: CPU time (user and system, every goroutine: the in-process
// nats-server and the clients alike) and write system calls (write, writev, pwrite...; Linux's
// /proc/self/io "syscw"). The difference of two samples around a measurement is its cost: the
// write count does not depend on what else runs on the machine, and the CPU time much less than
// wall-clock throughput does (contention still inflates it: caches, spinning).
type Cost struct {
	CPU    time.Duration
	Writes int64
}

// processCost samples [Cost] now. Errors: getrusage fails, or /proc/self/io is unreadable or
// has no syscw line (not Linux).
func processCost() (Cost, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Cost{}, fmt.Errorf("getrusage: %w", err)
	}
	c := Cost{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return Cost{}, err
	}
	for line := range strings.Lines(string(io)) {
		if v, ok := strings.CutPrefix(line, "syscw:"); ok {
			if c.Writes, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				return Cost{}, fmt.Errorf("/proc/self/io: syscw: %w", err)
			}
			return c, nil
		}
	}
	return Cost{}, errors.New("/proc/self/io: no syscw line")
}

// median is the middle value of xs (the upper one of an even count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
