// Package drift is the drift service's logic: it keeps a schedule of applied resources in the
// JetStream KV bucket lava-drift-schedule, scans each one every driftInterval (with jitter)
// through its engine's ScanDrift, and publishes DriftScanned with findings classified as
// docs/dialect.md section 6.1 (delete and replace critical, create functional, update cosmetic under a
// cosmetic prefix, otherwise functional). It only reports; viggy decides.
//
// # Schedule
//
// One entry per resource under [bus.ResourceKey]: added or updated by Applied (what to scan:
// engine, artifact digest, providers, plan id), by ResourceObserved (the interval, suspend, the
// newest generation), removed by Destroyed. A scan is due at the last scan (or apply) plus the
// interval with ±Jitter. Every replica watches the bucket; a replica claims a due entry with
// a compare-and-set on its revision before scanning, so two replicas never scan the same
// resource at once, and a crashed claimer's claim expires after [Config].ClaimTTL. The
// schedule survives restarts because it lives in the bucket.
//
// While a new generation is observed but not yet applied, or the resource is suspended or
// finalizing, the entry is kept but not scanned.
package drift
