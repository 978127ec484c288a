package main

import (
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/svc"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// run is the service binary (svc.Command: flags, LAVA_* variables, exit codes svc.Exit*).
var run = svc.Command(bus.ServiceWatcher, watcher.Run)

func main() { svc.Main(run) }
