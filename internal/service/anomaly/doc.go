// Package anomaly is the anomaly service's logic: it turns failures, gate rejections, drift and
// stuck resources into typed anomalies ([LavaAnomaly]), de-duplicates them per fingerprint in a
// window shared by every replica ([Windows], a JetStream KV bucket), and routes them by rules
// ([Routing]) to sinks (docs/architecture.md section 2, docs/dialect.md section 7).
//
// # Sources
//
// The [Service] consumes, with the durable consumer "anomaly":
//
//   - from LAVA_PHASES: Failed ([FromFailed]: stage and reason pick the kind), DriftScanned
//     with findings ([FromDriftScanned]), PhaseChanged to a dependency-blocked or stalled
//     state ([FromPhaseChanged]); TickReported is acknowledged and not used;
//   - a progress deadline: PhaseChanged also tracks resources in a working phase
//     ([BucketProgress]); one that stays there longer than stuckAfter (default 30m) raises a
//     Stalled anomaly with reason ProgressDeadlineExceeded; a plan held for approval longer than
//     approvalAfter (default 24h) raises the Custom anomaly approval_overdue once;
//   - from LAVA_ANOMALIES: AnomalyDetected that other services publish directly
//     ([FromDetected]): viggy's escalation tiers, and every service's poison-message reports
//     (pipeline.PoisonReporter, kind Custom "poison_message"). Those are already on the public
//     subjects, so they go only to the other sinks; the service's own anomalies
//     (envelope.source "anomaly", except its poison-message reports) are acknowledged and
//     skipped. viggy leaves DriftDetected (Alert) and Stalled (RetriesExhausted) to this
//     service, which raises them from DriftScanned and Failed.
//
// # De-duplication
//
// A fingerprint ([Fingerprint]) is BLAKE3 of (kind, extension kind, resource uid, severity, a
// stable discriminator: the Terraform JSON digest for drift, "stage/reason" for failures, the
// reason for blocked dependencies, nothing for stalls), never of times, messages or secret
// values. The first sighting opens a window (default 10m) and is routed; a repeat within it
// raises the window's count and last sighting and is not routed again.
//
// # Sinks
//
// The subjects lava.anomaly.<severity>.<kind> (protojson, Lava-Schema header; always on: the
// public alerting contract), a generic webhook (HMAC-SHA256 signature header, bounded retries),
// the Alertmanager v2 API and Kubernetes Events (events.k8s.io/v1) on the LavaArchitecture.
package anomaly
