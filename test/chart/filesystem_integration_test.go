//go:build integration

package chart

import (
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/lava-operator/lava/internal/lang/policy"
)

// TestEngineFilesystem is the chart's side of docs/security.md "Engines" (file writes): the
// applier and drift containers run as non-root on a read-only root filesystem even when the
// values' securityContext says otherwise, the provider mirror is read-only (a read-only volume,
// or the image's directory on the read-only root), the installer's provider cache is its own
// emptyDir volume apart from the work directory, no writable mount holds the mirror, both read
// the tenant policy synth reads (its ConfigMap, read-only, as LAVA_POLICY_FILE), and the
// default tenant policy lets no resource write a file (fileWriteRoots empty).
func TestEngineFilesystem(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		volume bool // providerVolume set: the mirror is a read-only volume mount
		cache  string
	}{
		{name: "default"},
		{name: "relaxed values", volume: true, cache: "/var/cache/lava-providers", args: []string{
			"--set", "securityContext.readOnlyRootFilesystem=false", "--set", "securityContext.runAsNonRoot=false",
			"--set", "applier.providerVolume.persistentVolumeClaim.claimName=providers",
			"--set", "drift.providerVolume.persistentVolumeClaim.claimName=providers",
			"--set", "applier.providerInstall.cacheDir=/var/cache/lava-providers",
			"--set", "drift.providerInstall.cacheDir=/var/cache/lava-providers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decode(t, render(t, tc.args...))
			seen := 0
			for _, u := range objs {
				switch {
				case u.GetKind() == "Deployment" && (u.GetName() == "lava-applier" || u.GetName() == "lava-drift"):
					seen++
					checkEnginePod(t, u.GetName(), convert[appsv1.Deployment](t, u).Spec.Template.Spec, tc.volume, tc.cache)
				case u.GetKind() == "ConfigMap" && u.GetName() == "lava-policy":
					cm := convert[corev1.ConfigMap](t, u)
					cfg, err := policy.Parse([]byte(cm.Data["policy.yaml"]))
					if err != nil {
						t.Fatalf("lava-policy: %v", err)
					}
					if roots := cfg.For("any-namespace").FileWriteRoots; len(roots) != 0 {
						t.Errorf("the chart's default policy allows file writes under %v", roots)
					}
				}
			}
			if seen != 2 {
				t.Fatalf("found %d of the applier and drift Deployments", seen)
			}
		})
	}
}

func checkEnginePod(t *testing.T, name string, pod corev1.PodSpec, volume bool, cache string) {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(pod.Containers))
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: container securityContext %+v, want readOnlyRootFilesystem and runAsNonRoot", name, sc)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	mirror := env["LAVA_PROVIDER_DIR"]
	if mirror == "" {
		t.Fatalf("%s: no LAVA_PROVIDER_DIR", name)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	// The engines hold provider file paths to synth's policy document: the same ConfigMap,
	// read-only (docs/design/0022-file-access-from-schemas.md).
	policyMounted := false
	for _, m := range c.VolumeMounts {
		if v := volumes[m.Name]; v.ConfigMap != nil && v.ConfigMap.Name == "lava-policy" && m.ReadOnly &&
			env["LAVA_POLICY_FILE"] == path.Join(m.MountPath, "policy.yaml") {
			policyMounted = true
		}
	}
	if !policyMounted {
		t.Errorf("%s: LAVA_POLICY_FILE %q is not the lava-policy ConfigMap mounted read-only", name, env["LAVA_POLICY_FILE"])
	}
	var mirrorMount, cacheMount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		switch {
		case m.MountPath == mirror:
			mirrorMount = &c.VolumeMounts[i]
		case cache != "" && m.MountPath == cache:
			cacheMount = &c.VolumeMounts[i]
		}
		if !m.ReadOnly && m.MountPath != mirror && (mirror == m.MountPath || strings.HasPrefix(mirror, m.MountPath+"/")) {
			t.Errorf("%s: the writable mount %s at %s holds the provider mirror %s", name, m.Name, m.MountPath, mirror)
		}
	}
	switch {
	case volume && (mirrorMount == nil || !mirrorMount.ReadOnly):
		t.Errorf("%s: the provider volume at %s is not mounted read-only: %+v", name, mirror, mirrorMount)
	case !volume && mirrorMount != nil:
		t.Errorf("%s: a volume is mounted at %s without providerVolume: %+v", name, mirror, mirrorMount)
	}
	if cache == "" {
		if _, ok := env["LAVA_PROVIDER_CACHE_DIR"]; ok {
			t.Errorf("%s: LAVA_PROVIDER_CACHE_DIR set without providerInstall.cacheDir", name)
		}
		return
	}
	if env["LAVA_PROVIDER_CACHE_DIR"] != cache || cacheMount == nil || cacheMount.Name == "work" || cacheMount.ReadOnly {
		t.Fatalf("%s: LAVA_PROVIDER_CACHE_DIR %q, mount %+v; want %s on its own writable volume", name, env["LAVA_PROVIDER_CACHE_DIR"], cacheMount, cache)
	}
	if v := volumes[cacheMount.Name]; v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero() {
		t.Errorf("%s: the provider cache's volume %+v, want a size-limited emptyDir", name, v)
	}
	if path.Clean(cache) == path.Clean(mirror) {
		t.Errorf("%s: the provider cache is the mirror", name)
	}
}
