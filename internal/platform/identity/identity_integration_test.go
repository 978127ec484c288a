//go:build integration

package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lava-operator/lava/internal/platform/identity"
	"github.com/lava-operator/lava/internal/platform/testutil/kubetest"
)

// TestOptions_whoAnObjectActsAs checks, on a real API server with RBAC, the admin's choices of
// --default-service-account and --allow-own-identity (parsed from the flags as synth, the
// applier and drift parse them): an object without spec.serviceAccountName acts as the default
// ServiceAccount of its own namespace (what that ServiceAccount's RBAC allows, and nothing
// more), else with Lava's own identity only when allowed, else not at all
// (ErrNoServiceAccount); a named ServiceAccount always wins over the default.
func TestOptions_whoAnObjectActsAs(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t)
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-default"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-allowed"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"allowed"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-allowed"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-allowed"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant-default", Namespace: ns}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allowed"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forbidden"}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}

	// clients parses args as a service does and returns its Clients.
	clients := func(t *testing.T, args ...string) *identity.Clients {
		t.Helper()
		var o identity.Options
		fs := pflag.NewFlagSet("svc", pflag.ContinueOnError)
		o.Register(fs)
		if err := fs.Parse(append([]string{"--impersonate"}, args...)); err != nil {
			t.Fatal(err)
		}
		c, err := o.Clients(env.Config)
		if err != nil || c == nil {
			t.Fatalf("Clients: %v, %v", c, err)
		}
		return c
	}
	// get reads Secret name as the identity For gives for an object naming sa.
	get := func(t *testing.T, c *identity.Clients, sa, name string) (who string, err error) {
		t.Helper()
		cl, who, err := c.For(ns, sa)
		if err != nil {
			return who, err
		}
		return who, cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	}
	// forbiddenFor fails unless err is the API server's Forbidden for the ServiceAccount sa.
	forbiddenFor := func(t *testing.T, err error, sa string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), identity.Username(ns, sa)) {
			t.Errorf("got %v, want Forbidden for %s", err, identity.Username(ns, sa))
		}
	}

	t.Run("default ServiceAccount", func(t *testing.T) {
		c := clients(t, "--default-service-account=tenant-default")
		who, err := get(t, c, "", "allowed")
		if err != nil || who != "ServiceAccount "+ns+"/tenant-default" {
			t.Errorf("allowed Secret: %q, %v; want read as ServiceAccount %s/tenant-default", who, err, ns)
		}
		_, err = get(t, c, "", "forbidden")
		forbiddenFor(t, err, "tenant-default")
		// A ServiceAccount the object names wins over the default, with its own (empty) RBAC.
		_, err = get(t, c, "other", "allowed")
		forbiddenFor(t, err, "other")
	})
	t.Run("own identity allowed", func(t *testing.T) {
		c := clients(t, "--allow-own-identity")
		who, err := get(t, c, "", "forbidden")
		if err != nil || who != "Lava's own identity" {
			t.Errorf("no ServiceAccount, own identity allowed: %q, %v; want read with Lava's own identity", who, err)
		}
		_, err = get(t, c, "other", "allowed")
		forbiddenFor(t, err, "other")
	})
	t.Run("neither", func(t *testing.T) {
		c := clients(t)
		if _, err := get(t, c, "", "allowed"); !errors.Is(err, identity.ErrNoServiceAccount) {
			t.Errorf("no ServiceAccount, no default, own identity not allowed: %v, want ErrNoServiceAccount", err)
		}
	})
	t.Run("impersonation off", func(t *testing.T) {
		var o identity.Options
		fs := pflag.NewFlagSet("svc", pflag.ContinueOnError)
		o.Register(fs)
		if err := fs.Parse([]string{"--impersonate=false", "--default-service-account=tenant-default"}); err != nil {
			t.Fatal(err)
		}
		if c, err := o.Clients(env.Config); c != nil || err != nil {
			t.Errorf("with --impersonate=false: Clients %v, %v; want none (the service's own identity)", c, err)
		}
	})
	t.Run("impersonation is the default", func(t *testing.T) {
		var o identity.Options
		fs := pflag.NewFlagSet("svc", pflag.ContinueOnError)
		o.Register(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if c, err := o.Clients(env.Config); c == nil || err != nil {
			t.Errorf("no flags: Clients %v, %v; want impersonation (the chart's default)", c, err)
		}
	})
}

// TestCheckImpersonation: on a real API server with RBAC, the check `lava up --kubeconfig` makes
// at start passes for an identity that may impersonate ServiceAccounts in the watched
// namespaces and names the user and the first namespace where it may not; without namespaces it
// asks for every namespace.
func TestCheckImpersonation(t *testing.T) {
	env := kubetest.Start(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impersonate"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "impersonate"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "impersonate"},
			Subjects: []rbacv1.Subject{{Kind: "User", Name: "dev"}}},
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := identity.CheckImpersonation(t.Context(), env.Config, nil); err != nil {
		t.Errorf("admin, every namespace: %v", err)
	}
	dev := rest.CopyConfig(env.Config)
	dev.Impersonate = rest.ImpersonationConfig{UserName: "dev"}
	if err := identity.CheckImpersonation(t.Context(), dev, []string{ns}); err != nil {
		t.Errorf("dev in %s: %v", ns, err)
	}
	for _, c := range []struct {
		namespaces []string
		want       string
	}{
		{[]string{ns, other}, `user "dev" may not impersonate ServiceAccounts in namespace "` + other + `"`},
		{nil, `user "dev" may not impersonate ServiceAccounts in every namespace`},
	} {
		err := identity.CheckImpersonation(t.Context(), dev, c.namespaces)
		if !errors.Is(err, identity.ErrImpersonationRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dev in %v: %v, want ErrImpersonationRefused with %q", c.namespaces, err, c.want)
		}
	}
}
