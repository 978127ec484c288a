// Package remediation is the remediation policy in the form the services carry it
// (lavav1.RemediationPolicy, in ResourceObserved.remediation): the mapping of the CRD's actions
// (api/v1alpha1.RemediationAction) to the proto enum and back, and the default policy, which is
// api/v1alpha1.DefaultDriftRemediation (its one declaration) in proto form. The watcher
// resolves a resource's policy with it; viggy and the anomaly service fall back to [Default].
package remediation
