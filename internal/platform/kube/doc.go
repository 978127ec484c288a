// Package kube is the one way Lava's services and CLI reach the Kubernetes API: the REST
// configuration ([Config], [Optional]: controller-runtime's precedence, or an explicit
// kubeconfig file) and the scheme of every kind Lava reads or writes ([NewScheme]).
package kube
