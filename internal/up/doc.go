// Package up is `lava up`, the embedded default: an in-process NATS JetStream server with its
// file store under a state directory, the JetStream topology, and every Lava service (synth,
// applier, drift, viggy, anomaly, attest) in one process, built from the same internal
// packages as the service binaries.
//
// Without a kubeconfig a file source plays the watcher's role ([Source]): LavaArchitecture
// manifests are read from files and directories, re-read on change, and each resource is kept
// as an object file under <state-dir>/status/<namespace>/<name>.yaml (a name too long for a
// file name is cut and given a hash: statusFileName) (metadata with a random
// uid per incarnation and a generation bumped on every spec change, the spec, and the status
// folded from the phase events by the watcher's own [watcher.Core] over the file store, which
// writes every fold at once). A removed
// document is a deletion: DeletionRequested, then the object file goes after Destroyed. With a
// kubeconfig the watcher itself runs against that cluster instead. A resource that failed
// because a provider or an engine was missing gets one new pass when a later run has a
// different provider mirror or engines ([AnnotationRetryEnvironment]).
//
// The terminal shows a table of resource, phase, engine, resources and last change, and a
// progress line while an engine works: redrawn in place when stdout is a terminal, one line
// per transition otherwise.
package up
