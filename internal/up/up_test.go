package up

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/engines"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/service/applier"
	"github.com/lava-operator/lava/internal/service/drift"
)

func TestSettled(t *testing.T) {
	t.Parallel()
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	obj := func(gen, observed int64, p v1alpha1.Phase, conds ...metav1.Condition) v1alpha1.LavaArchitecture {
		o := v1alpha1.LavaArchitecture{}
		o.Generation = gen
		o.Status.ObservedGeneration, o.Status.Phase, o.Status.Conditions = observed, p, conds
		return o
	}
	deleting := obj(1, 1, v1alpha1.PhaseApplied)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tests := []struct {
		name string
		o    v1alpha1.LavaArchitecture
		want bool
	}{
		{"applied", obj(2, 2, v1alpha1.PhaseApplied), true},
		{"failed", obj(1, 1, v1alpha1.PhaseFailed), true},
		{"applied, older generation", obj(2, 1, v1alpha1.PhaseApplied), false},
		{"pending", obj(1, 1, v1alpha1.PhasePending), false},
		{"fresh", obj(1, 0, ""), false},
		{"planned", obj(1, 1, v1alpha1.PhasePlanned), false},
		{"awaiting approval", obj(1, 1, v1alpha1.PhasePlanned, cond(v1alpha1.ConditionAwaitingApproval, metav1.ConditionTrue)), true},
		{"suspended", obj(1, 1, v1alpha1.PhasePending, cond(v1alpha1.ConditionSuspended, metav1.ConditionTrue)), true},
		{"being deleted", deleting, false},
	}
	for _, tt := range tests {
		if got := Settled(tt.o); got != tt.want {
			t.Errorf("%s: Settled = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestTable_andProgress(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	o := v1alpha1.LavaArchitecture{}
	o.Namespace, o.Name, o.Generation = "infra", "prod-vpc", 1
	o.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	o.Status.Phase, o.Status.ObservedGeneration = v1alpha1.PhaseFailed, 1
	o.Status.Render = &v1alpha1.RenderRecord{ResourceCount: 1}
	o.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ProviderUnavailable",
		Message: "provider hashicorp/aws is not available", LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Second))}}
	p := o.DeepCopy()
	p.Name, p.Status.Phase = "app", v1alpha1.PhasePlanned
	p.Status.Plan = &v1alpha1.PlanSummary{Add: 2}
	// A plan held for approval says so (before, the table showed nothing: a mistyped
	// spec.approvePlan held the object with no visible reason).
	h := p.DeepCopy()
	h.Name = "held"
	h.Status.Conditions = append(h.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionAwaitingApproval, Status: metav1.ConditionTrue,
		Reason: "ApprovalRequired", Message: "plan 7918ab awaits approval: set spec.approvePlan to 7918ab", LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Second))})
	got := Table(Snapshot{Objects: []v1alpha1.LavaArchitecture{o, *p, *h}, FileErrors: []*manifest.FileError{{File: "x.yaml", Err: os.ErrPermission}}}, now)
	want := "RESOURCE        PHASE    ENGINE    RESOURCES     LAST CHANGE  MESSAGE\n" +
		"infra/prod-vpc  Failed   embedded  1             3s ago       ProviderUnavailable: provider hashicorp/aws is not available\n" +
		"infra/app       Planned  embedded  1 (+2 ~0 -0)  3s ago\n" +
		"infra/held      Planned  embedded  1 (+2 ~0 -0)  3s ago       plan 7918ab awaits approval: set spec.approvePlan to 7918ab\n" +
		"! x.yaml: permission denied\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if line := progressLine([]v1alpha1.LavaArchitecture{o, *p}, now, 0); line != "⠋ infra/app: applying (+2 ~0 -0) with embedded (3s)\n" {
		t.Errorf("progress line %q", line)
	}
	if line := progressLine([]v1alpha1.LavaArchitecture{o}, now, 0); line != "" {
		t.Errorf("progress line %q for a settled resource, want none", line)
	}
	if got := fitWidth("abcdef\nab\n", 5); got != "abc…\nab\n" {
		t.Errorf("fitWidth = %q", got)
	}
}

// pipedDisplay is a display without a terminal at 00:00:00, writing into b, and the object
// default/a of generation 1, observed, in phase p.
func pipedDisplay(p v1alpha1.Phase) (d *Display, b *strings.Builder, o v1alpha1.LavaArchitecture) {
	b = &strings.Builder{}
	d = NewDisplay(b, false, func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) })
	o.Namespace, o.Name, o.Generation = "default", "a", 1
	o.Status.Phase, o.Status.ObservedGeneration = p, 1
	return d, b, o
}

func TestDisplayUpdate_fileErrorsAreNotResources(t *testing.T) {
	t.Parallel()
	d, b, o := pipedDisplay(v1alpha1.PhaseApplied)
	bad := &manifest.FileError{File: "/m/bad.yaml", Err: os.ErrInvalid}
	for range 3 {
		d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}, FileErrors: []*manifest.FileError{bad}})
	}
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}}) // the file was fixed
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}, FileErrors: []*manifest.FileError{bad}})
	d.Update(Snapshot{})
	want := "00:00:00 default/a                    gen 1  Applied      -\n" +
		"00:00:00 /m/bad.yaml: invalid argument\n" +
		"00:00:00 /m/bad.yaml: invalid argument\n" +
		"00:00:00 default/a                    destroyed\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("non-tty output (-want +got):\n%s", diff)
	}
}

// TestDisplayUpdate_samePhaseOtherReason: a Pending object whose Ready reason changes (the
// finalizer added, then waiting for synth) is one line, not two; a change of phase is a line.
func TestDisplayUpdate_samePhaseOtherReason(t *testing.T) {
	t.Parallel()
	d, b, o := pipedDisplay(v1alpha1.PhasePending)
	for _, reason := range []string{"Progressing", "AwaitingSynthesis"} {
		o.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
		d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	}
	o.Status.Phase = v1alpha1.PhaseSynthesized
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	want := "00:00:00 default/a                    gen 1  Pending      -\n" +
		"00:00:00 default/a                    gen 1  Synthesized  -\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("non-tty output (-want +got):\n%s", diff)
	}
}

// TestDisplayUpdate_specChange: after a spec change, until the status is the new
// generation's, the row is Pending without the previous generation's plan summary (before, it
// read "gen 2 Applied 1 (+1 ~0 -0)": the new generation beside the old phase and create).
func TestDisplayUpdate_specChange(t *testing.T) {
	t.Parallel()
	d, b, o := pipedDisplay(v1alpha1.PhaseApplied)
	o.Status.Render, o.Status.Plan = &v1alpha1.RenderRecord{ResourceCount: 1}, &v1alpha1.PlanSummary{Add: 1}
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	o.Generation = 2
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	o.Status.ObservedGeneration, o.Status.Plan = 2, &v1alpha1.PlanSummary{Change: 1}
	d.Update(Snapshot{Objects: []v1alpha1.LavaArchitecture{o}})
	want := "00:00:00 default/a                    gen 1  Applied      1 (+1 ~0 -0)\n" +
		"00:00:00 default/a                    gen 2  Pending      1\n" +
		"00:00:00 default/a                    gen 2  Applied      1 (+0 ~1 -0)\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("non-tty output (-want +got):\n%s", diff)
	}
}

func TestLockStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = LockStateDir(dir)
	want := fmt.Sprintf("up: state dir %s is in use by another lava up (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	release()
	release2, err := LockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release2()
}

// TestRun_stateDirAttacks: another local user who made the state directory first (and
// planted NATS seeds and an RPC token there, which lava up would otherwise keep and trust)
// stops lava up at start, before NATS, naming the owner; so does a state directory open to
// others' writes or a symbolic link. An own directory only readable by others is narrowed to
// 0700, and a new one is created 0700.
func TestRun_stateDirAttacks(t *testing.T) {
	t.Parallel()
	m := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(m, []byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\nspec: {source: {name: dns-record-set}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	run := func(dir string) error {
		_, err := Run(t.Context(), Options{Paths: []string{m}, StateDir: dir, FileRoot: filepath.Join(t.TempDir(), "files"),
			Once: true, Timeout: time.Minute, Log: io.Discard})
		return err
	}
	// Another user's directory with planted credentials: one this test gives away when it runs
	// as root, else "/".
	foreign, owner := "/", "0"
	if os.Getuid() == 0 {
		foreign, owner = filepath.Join(base, "planted"), "65534"
		if err := os.MkdirAll(filepath.Join(foreign, DirNATS), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(foreign, FileRPCToken), []byte("attacker-known-token\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{foreign, filepath.Join(foreign, DirNATS), filepath.Join(foreign, FileRPCToken)} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}
	writable := filepath.Join(base, "writable")
	if err := os.Mkdir(writable, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o757); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ dir, want string }{
		{foreign, "up: state dir " + foreign + " is owned by uid " + owner + ", not by this user"},
		{writable, "up: state dir " + writable + " has mode 0757, open to group or others"},
		{link, "up: state dir " + link + " is a symbolic link"},
	} {
		if err := run(tt.dir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run with the state dir %s: %v, want an error with %q", tt.dir, err, tt.want)
		}
		if _, err := os.Stat(filepath.Join(tt.dir, FileNATSURL)); err == nil {
			t.Errorf("Run started NATS in the refused state dir %s", tt.dir)
		}
	}
	if tok, err := os.ReadFile(filepath.Join(foreign, FileRPCToken)); err == nil && string(tok) != "attacker-known-token\n" {
		t.Errorf("the planted token was rewritten: lava up used the directory")
	}

	readable := filepath.Join(base, "readable")
	if err := os.Mkdir(readable, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(base, "fresh", "state")
	for _, dir := range []string{readable, fresh} {
		s := &session{o: Options{StateDir: dir, FileRoot: filepath.Join(t.TempDir(), "files"), LogLevel: "info"}}
		if err := s.prepareStateDir(t.Context()); err != nil {
			t.Fatalf("prepareStateDir(%s): %v", dir, err)
		}
		s.unlock()
		if s.logFile != nil {
			s.logFile.Close()
		}
		if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("state dir %s: %v (%v), want mode 0700", dir, st.Mode().Perm(), err)
		}
	}
}

// TestRun_stateDirInUse: a second Run on a locked state directory fails before starting NATS.
func TestRun_stateDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release, err := LockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(m, []byte("apiVersion: lava.pleme.io/v1alpha1\nkind: LavaArchitecture\nmetadata: {name: a}\nspec: {source: {name: dns-record-set}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), Options{Paths: []string{m}, StateDir: dir, Once: true, Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "is in use by another lava up") {
		t.Fatalf("Run on a locked state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileNATSURL)); err == nil {
		t.Errorf("Run wrote %s although the state dir was locked", FileNATSURL)
	}
}

// TestEnsurePrivateDir_attacks: lava up's file root is a directory only its user may use: a
// missing one is created with mode 0700, an own 0700 one is taken; a pre-existing symbolic
// link (to a directory the attacker controls), a directory of another user, one open to group
// or others, and a file are refused, each naming what is wrong.
func TestEnsurePrivateDir_attacks(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := ensurePrivateDir(fresh, fileRootDir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(fresh); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("created %v (%v), want a directory with mode 0700", st, err)
	}
	if err := ensurePrivateDir(fresh, fileRootDir); err != nil {
		t.Errorf("an own 0700 directory is refused: %v", err)
	}

	elsewhere := t.TempDir()
	link := filepath.Join(base, "link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Another user's directory: one this test gives away when it runs as root, else "/".
	foreign, owner := "/", "0"
	if os.Getuid() == 0 {
		foreign, owner = filepath.Join(base, "foreign"), "65534"
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ dir, want string }{
		{link, link + " is a symbolic link"},
		{open, open + " has mode 0777, open to group or others"},
		{file, file + " is not a directory"},
		{foreign, foreign + " is owned by uid " + owner + ", not by this user"},
	} {
		if err := ensurePrivateDir(tt.dir, fileRootDir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ensurePrivateDir(%s) = %v, want an error with %q", tt.dir, err, tt.want)
		}
	}
}

// TestSource_loadStatusFiles: a long name's status file of the cut form earlier versions wrote
// is renamed to its own file at load (or removed when that one exists); a status file that
// holds another object than its name says is an error, never loaded as that object.
func TestSource_loadStatusFiles(t *testing.T) {
	t.Parallel()
	label := strings.Repeat("a", 63)
	long := label + "." + label + "." + label + "." + strings.Repeat("b", 61)
	write := func(dir, file string, obj v1alpha1.LavaArchitecture) {
		t.Helper()
		data, err := sigsyaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, obj.Namespace), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, obj.Namespace, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obj := func(name, uid string) v1alpha1.LavaArchitecture {
		var o v1alpha1.LavaArchitecture
		o.Namespace, o.Name, o.UID = "ns", name, types.UID(uid)
		return o
	}
	dir := t.TempDir()
	write(dir, legacyStatusFileName(long), obj(long, "u1"))
	s := &Source{cfg: SourceConfig{StatusDir: dir}, objs: map[string]*v1alpha1.LavaArchitecture{}}
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	if o := s.objs["ns/"+long]; o == nil || o.UID != "u1" {
		t.Fatalf("loaded %v, want the long name's object", s.objs)
	}
	if _, err := os.Stat(filepath.Join(dir, "ns", statusFileName(long))); err != nil {
		t.Errorf("the legacy file was not renamed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ns", legacyStatusFileName(long))); !os.IsNotExist(err) {
		t.Errorf("the legacy file is still there: %v", err)
	}

	bad := t.TempDir()
	write(bad, "victim.yaml", obj("attacker", "u2"))
	s = &Source{cfg: SourceConfig{StatusDir: bad}, objs: map[string]*v1alpha1.LavaArchitecture{}}
	if err := s.load(); err == nil || !strings.Contains(err.Error(), "holds ns/attacker, whose status file is") {
		t.Errorf("load of a misplaced status file: %v, want an error", err)
	}
}

// TestOneLine_escapesControls: a message a provider or a manifest made (a file name with an OSC
// title sequence, a line erase and a carriage return; a bidirectional override) is printed with
// those characters escaped, so it cannot retitle the terminal or rewrite the status line.
func TestOneLine_escapesControls(t *testing.T) {
	t.Parallel()
	msg := "create /tmp/lava-demo/\x1b]0;PWNED\a\x1b[2K\rXX\u202egnp.exe failed\nsecond line"
	want := `create /tmp/lava-demo/\x1b]0;PWNED\x07\x1b[2K\x0dXX\u202egnp.exe failed`
	if got := oneLine(msg, 200); got != want {
		t.Errorf("oneLine = %q,\nwant      %q", got, want)
	}
	if got := oneLine("\x1b[31m"+strings.Repeat("x", 300), 10); got != `\x1b[31mxxxx…` {
		t.Errorf("cut then escaped: %q", got)
	}
}

// TestSession_enginesShareProcessBudget: lava up runs the applier and drift in one process,
// so their embedded engines share one provider process budget (--max-provider-processes
// bounds lava up, not each service).
func TestSession_enginesShareProcessBudget(t *testing.T) {
	t.Parallel()
	s := &session{o: Options{StateDir: t.TempDir(), MaxProviderProcesses: 5}}
	a := s.engines(engines.Options{}, bus.ServiceApplier)
	d := s.engines(engines.Options{}, bus.ServiceDrift)
	if a.ProviderProcesses == nil || a.ProviderProcesses != d.ProviderProcesses {
		t.Errorf("applier's budget %p, drift's %p; want one, shared", a.ProviderProcesses, d.ProviderProcesses)
	}
}

// TestSession_enginesTimeouts: lava up's --plan-timeout, --apply-timeout and --destroy-timeout
// reach the engines of the applier and of drift, over the services' flag defaults.
func TestSession_enginesTimeouts(t *testing.T) {
	t.Parallel()
	s := &session{o: Options{Timeouts: engine.Timeouts{Plan: time.Minute, Apply: 2 * time.Minute, Destroy: 3 * time.Minute}}}
	for _, e := range []engine.Timeouts{
		s.engines(flagDefaults[applier.Options]().Engines, "applier").Timeouts,
		s.engines(flagDefaults[drift.Options]().Engines, "drift").Timeouts,
	} {
		if e != s.o.Timeouts {
			t.Errorf("engines' timeouts %+v, want lava up's %+v", e, s.o.Timeouts)
		}
	}
}
