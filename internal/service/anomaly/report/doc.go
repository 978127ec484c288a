// Package report is the part of the anomaly contract every service shares without the anomaly
// service's dependencies (no Kubernetes client): the fingerprint ([Fingerprint]), the
// sanitizer ([Sanitize]) and the poison-message reporter ([PoisonReporter]) that turns a
// message bus.Consume terminated into an AnomalyDetected (docs/architecture.md section 3: poison messages are
// terminated and reported as an anomaly).
package report
