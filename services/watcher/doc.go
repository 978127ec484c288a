// Command watcher runs Lava's watcher service: the controller that watches LavaArchitectures,
// their RemediationPolicies and LavaArchitectureDependencies, publishes ResourceObserved and
// DeletionRequested, and (on the elected leader) folds the pipeline's phase events into status.
// The logic is in github.com/lava-operator/lava/internal/service/watcher; this command only reads its
// configuration (flags, or LAVA_* environment variables) and runs it. README.md documents the
// subjects, RBAC, metrics and configuration.
package main
