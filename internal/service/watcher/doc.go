// Package watcher is the logic of Lava's watcher service: the only component that watches and
// writes LavaArchitectures (docs/architecture.md). It turns cluster state into events and folds
// the pipeline's phase events back into status.
//
// # Resource side (every replica keeps a warm cache; the leader reconciles)
//
// A controller-runtime controller on client-go reconciles LavaArchitectures. It adds the
// finalizer lava.pleme.io/finalizer before anything is published; publishes ResourceObserved
// once per generation (or per value of the annotation lava.pleme.io/reconcile-requested-at, or
// per resourceVersion of the referenced RemediationPolicy), carrying the typed spec mirror, the
// effective remediation policy and the dependency state; publishes DeletionRequested when the
// object is being deleted; holds a resource back while spec.suspend is set (condition
// Suspended) or while a BlocksOn dependency has not reached its phase (condition
// DependenciesReady False naming what it waits for, or the cycle it is part of).
//
// Its watches are filtered so that its own status writes never trigger it: the
// LavaArchitecture watch passes a new generation, a changed reconcile-requested-at annotation
// or a new deletionTimestamp; other LavaArchitectures' phase changes only enqueue their
// dependents; RemediationPolicy and LavaArchitectureDependency changes enqueue the resources
// that use them (field indexes [IndexPolicyRef], [IndexDependsOn], [IndexEdgeFrom]).
//
// Event ids come from internal/platform/eventid with the generation as input and a trigger built from
// the forcing state ("generation:<n>" alone, else "reconcile:<value>" and/or
// "policy:<resourceVersion>" joined by ";"), so a repeated reconcile of the same state
// publishes the same id. [Observe] builds and publishes ResourceObserved and DeletionRequested
// for any [Store]: the reconciler calls it, and so does lava up's file source (internal/up).
// Before publishing, it reads the last message stored on the resource's subject and skips the
// publish when it has that id: a restarted watcher does not publish again for an unchanged
// generation, even outside JetStream's duplicate window. A ResourceObserved larger than the
// connection's max_payload is not published: the object is folded Failed, reason SpecTooLarge,
// with the event's size and the limit.
//
// # Phase side (leader only)
//
// A manager runnable that needs leader election consumes LAVA_PHASES with the durable consumer
// "watcher" and hands each event to the [Core], the one implementation of the fold (lava up's
// file source uses it over its files): it reduces the event with the pure reducer
// internal/pipeline onto the last status known for the object (kept in memory per
// resource, never read back from the informer cache) and writes the status through a [Store]
// ([NewAPIStore] here: status subresource merge patches with an optimistic lock; a conflict
// re-reads the object and reduces again, retry.RetryOnConflict). Every accepted transition is
// published as PhaseChanged at once, with an event id derived from the cause event's id. The
// status write is coalesced per object: it waits Config.StatusHold while the phase is one a
// later pipeline event supersedes and Config.StatusWindow once the object settled, and every
// event folded meanwhile rides on it; each event is acked only after that write, so a crash
// loses nothing (the events come back and re-publish the same PhaseChanged ids). The receipt
// head (ReceiptAppended) never causes a write of its own. Kubernetes Events are recorded for
// Applied, Failed, Drifted and awaiting approval only ([Actionable]). After Destroyed the
// finalizer is removed and the object goes away (docs/design/0007-status-writes.md).
//
// Many phase events are in flight at once (Config.PhaseConcurrency) because each waits for its
// write, so an object's events can reach the reducer out of order. The reducer treats an
// out-of-order event (Planned before Synthesized) as an illegal transition: such an event waits
// in its handler up to 3 s for the object's status to change and is folded as soon as its
// predecessor is; if it is still ahead it is naked, on its first four deliveries (its
// predecessor may be held by a dead watcher and come back after the ack wait), and logged and
// dropped on the fifth. An event the status has already passed is dropped at once.
//
// # Entry points
//
// [New] builds a [Watcher] from a rest.Config and a JetStream context ([Config]; tests);
// [Run] is the service, run the way every service is (internal/platform/svc): its [Options]
// (the common flags and the watcher's), the kubeconfig, svc.Start (NATS, topology, /metrics
// with controller-runtime's registry, /healthz, /readyz) and the manager.
package watcher
