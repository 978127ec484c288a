// Package viggy is the viggy service's logic: the autonomic loop and the only decider after
// apply (docs/architecture.md section 2, docs/dialect.md section 9).
//
// Each pass over a DriftScanned or a retryable Failed runs the seven beats Observe, Diff,
// Classify, Decide, Act, Attest, Tick ([RunPass]) and publishes a TickReported with every
// beat's status and timing; a failing beat marks the later ones Skipped and the pass ends in
// phase Failed (Attest failing is recorded but does not fail the pass).
//
// Decide applies the resource's effective remediation policy (carried by ResourceObserved:
// spec.remediation, a referenced RemediationPolicy, or the default Alert / AutoCorrect /
// RequireApproval for cosmetic / functional / critical; kept per resource in the KV bucket
// [Bucket]). Act really acts:
//
//   - AutoCorrect publishes ReapplyRequested (the applier re-plans and applies); the pass ends
//     in Reconverging;
//   - RequireApproval publishes ReapplyRequested with require_approval (the applier plans and
//     holds the plan, Planned with awaiting_approval and the plan id); the pass ends in Drifted;
//   - Escalate raises an AnomalyDetected for the first escalation tier, and one for each next
//     tier when its wait_before_next passes and the drift is still there; Drifted;
//   - Alert and NoOp publish nothing more; both end in Drifted (the anomaly service raises the
//     DriftDetected anomaly from the DriftScanned itself, so viggy does not publish it again);
//   - a clean scan ends in Applied.
//
// The watcher folds TickReported (Drifted, Reconverging) and clean DriftScanned (Applied) into
// the status.
//
// Failures: a retryable Failed is retried with capped exponential backoff and jitter: the due
// time is stored in the resource's record and a scheduler publishes RetryRequested to the failed
// stage when it is due (no handler sleeps). After MaxAttempts attempts viggy publishes a
// non-retryable Failed with reason RetriesExhausted (the watcher folds it into Stalled=True;
// the anomaly service raises the Stalled anomaly from it).
//
// The only anomalies viggy publishes itself are the escalation tiers, which only it knows;
// their fingerprint is the shared one (report.Fingerprint).
package viggy
