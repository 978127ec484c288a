package up

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/lang/arch"
	"github.com/lava-operator/lava/internal/manifest"
	"github.com/lava-operator/lava/internal/pipeline"
	"github.com/lava-operator/lava/internal/platform/bus"
	"github.com/lava-operator/lava/internal/platform/eventid"
	"github.com/lava-operator/lava/internal/service/watcher"
)

// Annotations the file source keeps on its objects (never taken from a manifest).
const (
	// AnnotationFile records the manifest file whose document created the object, as an
	// absolute path: the object belongs to it, and no other file's document updates it
	// ([Source.Scan]).
	AnnotationFile = "lava.pleme.io/file"
	// AnnotationEnvironment is the [SourceConfig].Environment digest when its last
	// ResourceObserved was published.
	AnnotationEnvironment = "lava.pleme.io/up-environment"
	// AnnotationRetryEnvironment is the environment digest a new pass was forced for: set when
	// a resource that failed because a provider or an engine was unavailable is observed in a
	// different environment (a provider mirror built since). It stays, as a
	// reconcile-requested-at annotation does, and is part of the ResourceObserved trigger.
	AnnotationRetryEnvironment = "lava.pleme.io/up-retry-environment"
)

// internalAnnotation reports whether k is one of the annotations the file source sets.
func internalAnnotation(k string) bool {
	return k == AnnotationFile || k == AnnotationEnvironment || k == AnnotationRetryEnvironment
}

// SourceConfig configures a [Source].
type SourceConfig struct {
	// JS is the JetStream context; the topology must exist.
	JS jetstream.JetStream
	// Paths are the manifest files and directories (-f).
	Paths []string
	// StatusDir holds one object file per resource: <StatusDir>/<namespace>/<name>.yaml
	// ([statusFileName]).
	StatusDir string
	// FileRoot, when set, is the directory of the namespaces' file roots (lava up's built-in
	// policy, [NamespaceRootsPolicy]): the Source creates <FileRoot>/<namespace> (mode 0700)
	// before it observes the first object of a namespace.
	FileRoot string
	// RunnerUID and RunnerGID, when RunnerUID > 0 (lava up --provider-runner), own each
	// namespace's directory below FileRoot, so the provider runners can write there.
	RunnerUID, RunnerGID int
	// OnlyNamespace, when set, is the only namespace whose documents are applied: a document of
	// another namespace is an error of its file (line:col, the reason) and changes nothing (its
	// object, if it has one from an earlier run, is kept as it is). lava up sets it when provider
	// runners are asked for and the kernel has no Landlock.
	OnlyNamespace string
	// Environment digests what the engines can use (the provider mirror's files, the CLI
	// binaries: [Environment]); called once per scan. A resource that failed with
	// ProviderUnavailable or EngineUnavailable in another environment gets a new pass (see
	// [AnnotationRetryEnvironment]), in the first scan that sees the new one. Nil: "".
	Environment func() string
	// Logger receives one line per publish and transition.
	Logger *slog.Logger
	// OnChange, if set, is called after any object changed (display refresh).
	OnChange func()
	// OnTransition, if set, is called for each accepted transition.
	OnTransition func(key string, tr pipeline.Transition, ev pipeline.Event)
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Source plays the watcher's role for manifests in files: it turns them into objects with a
// uid and a generation and publishes ResourceObserved and DeletionRequested; the watcher's
// [watcher.Core] folds the phase events into their status (and publishes PhaseChanged) over
// the Source's file store, which writes each object to its file under StatusDir.
type Source struct {
	cfg  SourceConfig
	pub  *bus.Publisher
	res  jetstream.Stream
	core *watcher.Core

	scanMu     sync.Mutex      // one Scan at a time
	reader     manifest.Reader // the manifest files, read again only when changed (scanMu)
	env        string          // the environment of the scan under way (scanMu)
	envScanned string          // the environment of the last scan that walked the manifests (scanMu)
	observeAll bool            // a scan asked to observe every object has not walked the manifests yet (scanMu)
	retry      map[string]bool // keys whose observation failed at the last scan: observed again at the next (scanMu)
	looked     int             // objects a scan looked at again: created, changed, or observed anyway (scanMu)

	mu         sync.Mutex
	objs       map[string]*v1alpha1.LavaArchitecture
	inline     map[string]func(arch.Pos) arch.Pos // key -> its manifest's [manifest.Manifest].MapInline
	fileErrors []*manifest.FileError
	scans      int             // completed scans
	nsDirs     map[string]bool // namespaces whose file root exists ([Source.namespaceDir])

	kick chan chan error // ScanNow's requests to Run
}

// NewSource loads the objects kept in cfg.StatusDir (from a previous run) and binds
// LAVA_RESOURCES.
func NewSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	res, err := cfg.JS.Stream(ctx, bus.StreamResources)
	if err != nil {
		return nil, fmt.Errorf("up: bind %s: %w", bus.StreamResources, err)
	}
	s := &Source{cfg: cfg, pub: bus.NewPublisher(cfg.JS), res: res, objs: map[string]*v1alpha1.LavaArchitecture{},
		kick: make(chan chan error)}
	if err := s.load(); err != nil {
		return nil, err
	}
	core, err := watcher.NewCore(watcher.CoreConfig{
		Store: fileStore{s}, Publisher: s.pub, Logger: cfg.Logger, Rewrite: s.rewrite,
		OnTransition: func(key types.NamespacedName, tr pipeline.Transition, ev pipeline.Event) {
			if cfg.OnTransition != nil {
				cfg.OnTransition(key.String(), tr, ev)
			}
		},
		OnWrite: func(types.NamespacedName) {
			if cfg.OnChange != nil {
				cfg.OnChange()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	s.core = core
	return s, nil
}

// load reads every object file of StatusDir.
func (s *Source) load() error {
	nss, err := os.ReadDir(s.cfg.StatusDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	for _, ns := range nss {
		if !ns.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.cfg.StatusDir, ns.Name()))
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		for _, f := range files {
			if filepath.Ext(f.Name()) != ".yaml" {
				continue
			}
			p := filepath.Join(s.cfg.StatusDir, ns.Name(), f.Name())
			data, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("up: %w", err)
			}
			obj := &v1alpha1.LavaArchitecture{}
			if err := sigsyaml.Unmarshal(data, obj); err != nil {
				return fmt.Errorf("up: %s: %w", p, err)
			}
			if obj.Name == "" || obj.UID == "" {
				return fmt.Errorf("up: %s: not an object written by lava up", p)
			}
			if err := s.loadedAt(p, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadedAt keeps obj, read from the status file p, when p is its own status file
// ([Source.objectPath]); a file of an earlier version's cut name ([legacyStatusFileName]) is
// renamed to it first (or removed, when the object's own file exists: that one is newer).
// Any other file holding obj is an error: lava up did not write it there.
func (s *Source) loadedAt(p string, obj *v1alpha1.LavaArchitecture) error {
	key := obj.Namespace + "/" + obj.Name
	own := s.objectPath(key)
	switch {
	case p == own:
	case filepath.Dir(p) == filepath.Dir(own) && len(obj.Name)+len(".yaml.tmp") > 255 && filepath.Base(p) == legacyStatusFileName(obj.Name):
		if _, err := os.Stat(own); err == nil {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("up: %w", err)
			}
			return nil // the own file is read on its own
		}
		if err := os.Rename(p, own); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	default:
		return fmt.Errorf("up: %s holds %s, whose status file is %s: not a file lava up wrote", p, key, own)
	}
	s.objs[key] = obj
	return nil
}

// Objects returns deep copies of the objects, sorted by namespace/name.
func (s *Source) Objects() []v1alpha1.LavaArchitecture {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]v1alpha1.LavaArchitecture, 0, len(s.objs))
	for _, o := range s.objs {
		out = append(out, *o.DeepCopy())
	}
	slices.SortFunc(out, func(a, b v1alpha1.LavaArchitecture) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// FileErrors returns the files that failed to read at the last scan, and whether a scan has
// completed at all (every object created, updated, observed or deleted as its manifests say).
func (s *Source) FileErrors() ([]*manifest.FileError, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fileErrors), s.scans > 0
}

// Run scans the manifests every interval until ctx is done; the first scan observes every
// object ([Source.Scan] with all: a previous run may have stopped between writing an object and
// publishing its event). A scan error (a -f path that vanished, an object that could not be
// observed) is logged; Scan retries what it did not do.
func (s *Source) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	all := true
	var reply chan error // a ScanNow waiting for this scan
	for {
		err := s.Scan(ctx, all)
		all = false // Scan keeps it until a scan walks the manifests
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.cfg.Logger.Warn("up: scan manifests", slog.Any("error", err))
		}
		if reply != nil {
			reply <- err
			reply = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case reply = <-s.kick:
		}
	}
}

// ScanNow asks [Source.Run] for a scan at once, without waiting for its interval, and returns
// that scan's error. It waits until Run has finished the scan, or ctx is done (then ctx's
// error), so it must only be called while Run runs. lava up --once calls it to confirm that
// the manifests did not change after every object settled.
func (s *Source) ScanNow(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case s.kick <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Scan reads the manifests once (a file unchanged since the last scan is not read again:
// [manifest.Reader]) and reconciles the objects with them. An object belongs to the file
// whose document created it ([AnnotationFile]: the file's absolute path): a new document
// creates an object (a new uid, generation 1); a changed spec bumps the generation; either
// publishes ResourceObserved. A document that is gone from its object's file (and that file
// read cleanly) starts deletion: DeletionRequested. A namespace/name that documents of more
// than one file define is an error of each of them ([manifest.Reader.Read]) and changes
// nothing: its object keeps its spec, uid and generation. A document of another file than its
// object's is never applied to that object: it waits while the object is destroyed (its own
// file no longer defines it) and then creates a new object, with a new uid; it is an error
// while the object's file cannot be read. With all set, every object is observed again (a
// restarted process publishes nothing for a generation already published: the event id is
// the same), at this scan or, when the manifests cannot be read, at the next scan that reads
// them. A document whose namespace's file root is refused (not a directory, a symbolic link,
// another user's) is an error of its file at its position, and its object, if any, is kept
// as it is. An object whose observation fails (an error of its own: a status file or NATS
// error) is observed again at the next scan, alone: its error is returned (joined with the
// others) but does not make the next scans look at every object again.
func (s *Source) Scan(ctx context.Context, all bool) error {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	s.observeAll = s.observeAll || all
	all = s.observeAll
	if s.cfg.Environment != nil {
		s.env = s.cfg.Environment()
		// A new environment: every object is looked at again, as some may have waited for it.
		all = all || (s.envScanned != "" && s.env != s.envScanned)
	}
	ms, ferrs, err := s.reader.Read(s.cfg.Paths)
	if err != nil {
		return err
	}
	broken := map[string]bool{}               // files (fileID) that did not read
	contested := map[string]map[string]bool{} // namespace/name -> files (fileID) defining it together
	for _, fe := range ferrs {
		id := fileID(fe.File)
		if fe.Key == "" {
			broken[id] = true
			continue
		}
		if contested[fe.Key] == nil {
			contested[fe.Key] = map[string]bool{}
		}
		contested[fe.Key][id] = true
	}
	ms, ferrs, refused := s.refuseNamespaces(ms, ferrs)
	s.mu.Lock()
	if s.inline == nil {
		s.inline = map[string]func(arch.Pos) arch.Pos{}
	}
	for _, m := range ms {
		if cur := s.objs[m.Key()]; cur == nil || fileID(cur.Annotations[AnnotationFile]) == fileID(m.File) {
			s.inline[m.Key()] = m.MapInline // not for a document waiting on another file's object
		}
	}
	s.mu.Unlock()

	var errs []error
	want := map[string]bool{} // keys whose object's own file defines them (or a new object's)
	retry := s.retry
	s.retry = map[string]bool{}
	for _, m := range ms {
		owner, err := s.upsert(ctx, m, all || retry[m.Key()])
		var rootErr *fileRootError
		if errors.As(err, &rootErr) {
			// The document's error, at its position; an object from before keeps its spec
			// and stays (refusing to apply is not a reason to destroy).
			ferrs = append(ferrs, &manifest.FileError{File: m.File, Key: m.Key(), Err: &manifest.PosError{Line: m.Line, Col: m.Col, Msg: rootErr.Error()}})
			want[m.Key()] = true
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Key(), err))
			s.retry[m.Key()] = true
		}
		if owner == "" {
			want[m.Key()] = true
		} else if broken[owner] {
			ferrs = append(ferrs, &manifest.FileError{File: m.File, Key: m.Key(), Err: &manifest.PosError{Line: m.Line, Col: m.Col,
				Msg: fmt.Sprintf("%s is the object of %s, which could not be read: this document waits until that file reads again", m.Key(), owner)}})
		}
	}
	s.mu.Lock()
	s.fileErrors = ferrs
	s.mu.Unlock()
	if s.cfg.OnChange != nil {
		s.cfg.OnChange()
	}
	for _, obj := range s.Objects() {
		key, owner := obj.Namespace+"/"+obj.Name, fileID(obj.Annotations[AnnotationFile])
		if want[key] || broken[owner] || contested[key][owner] || refused[key] {
			continue
		}
		if err := s.remove(ctx, key); err != nil {
			errs = append(errs, err) // a removal is tried again at every scan
		}
	}
	// Every object was looked at; those that failed are in s.retry.
	s.observeAll = false
	s.envScanned = s.env
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	s.mu.Lock()
	s.scans++
	s.mu.Unlock()
	return nil
}

// refuseNamespaces keeps the documents of [SourceConfig].OnlyNamespace (all without it); each
// other document becomes an error of its file, and its key is in refused (its object stays).
func (s *Source) refuseNamespaces(ms []manifest.Manifest, ferrs []*manifest.FileError) ([]manifest.Manifest, []*manifest.FileError, map[string]bool) {
	only := s.cfg.OnlyNamespace
	if only == "" {
		return ms, ferrs, nil
	}
	refused := map[string]bool{}
	kept := ms[:0:0]
	for _, m := range ms {
		if m.Object.Namespace == only {
			kept = append(kept, m)
			continue
		}
		refused[m.Key()] = true
		ferrs = append(ferrs, &manifest.FileError{File: m.File, Key: m.Key(), Err: &manifest.PosError{Line: m.Line, Col: m.Col,
			Msg: fmt.Sprintf("namespace %q refused: this kernel has no Landlock to sandbox provider runners, so lava up applies only namespace %q", m.Object.Namespace, only)}})
	}
	return kept, ferrs, refused
}

// fileID is the identity of a manifest file, to which its objects belong: its absolute clean
// path (symbolic links are not resolved, so a link switched to another file keeps its
// objects). "" stays "" (an object without a file belongs to none).
func fileID(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// upsert creates or updates the object of m and observes it when it is new or changed (or
// always when all is set). When the key's object belongs to another file than m's it does
// nothing and returns that file ([fileID]): the document is not this object's.
func (s *Source) upsert(ctx context.Context, m manifest.Manifest, all bool) (otherOwner string, err error) {
	key, id := m.Key(), fileID(m.File)
	// Before the object is created or changed: a namespace without a usable file root has no
	// object to plan, and its document says why (a *[fileRootError]).
	if err := s.namespaceDir(m.Object.Namespace); err != nil {
		return "", err
	}
	s.mu.Lock()
	cur := s.objs[key]
	var obj *v1alpha1.LavaArchitecture
	changed := false
	switch {
	case cur != nil && fileID(cur.Annotations[AnnotationFile]) != id:
		s.mu.Unlock()
		return fileID(cur.Annotations[AnnotationFile]), nil
	case cur != nil && cur.DeletionTimestamp != nil:
		// Being deleted: it comes back as a new incarnation once Destroyed.
		s.mu.Unlock()
		return "", nil
	case cur == nil:
		obj = m.Object.DeepCopy()
		obj.Annotations = userAnnotations(obj.Annotations)
		obj.UID = types.UID(newUID())
		obj.Generation = 1
		obj.CreationTimestamp = metav1.NewTime(s.cfg.Now().UTC().Truncate(time.Second))
		changed = true
	default:
		obj = cur.DeepCopy()
		if !equality.Semantic.DeepEqual(cur.Spec, m.Object.Spec) {
			obj.Spec = *m.Object.Spec.DeepCopy()
			obj.Generation++
			changed = true
		}
		if !equality.Semantic.DeepEqual(cur.Labels, m.Object.Labels) || !equality.Semantic.DeepEqual(userAnnotations(cur.Annotations), userAnnotations(m.Object.Annotations)) {
			obj.Labels = maps.Clone(m.Object.Labels)
			ann := userAnnotations(m.Object.Annotations)
			for k, v := range cur.Annotations {
				if internalAnnotation(k) {
					ann[k] = v
				}
			}
			obj.Annotations = ann
			changed = true
		}
	}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	if obj.Annotations[AnnotationFile] != id {
		obj.Annotations[AnnotationFile] = id
		changed = true
	}
	if changed {
		if err := s.writeLocked(obj); err != nil {
			s.mu.Unlock()
			return "", err
		}
	}
	s.mu.Unlock()
	if !changed && !all {
		return "", nil
	}
	s.looked++
	if changed && s.cfg.OnChange != nil {
		s.cfg.OnChange()
	}
	return "", s.submit(ctx, obj)
}

// fileRootError is a namespace's file root that [ensurePrivateDir] refused (not a directory, a
// symbolic link, another user's, open to others): an error of each document of that
// namespace, at its position, until the directory is fixed.
type fileRootError struct{ err error }

func (e *fileRootError) Error() string {
	return "not applied: " + strings.TrimPrefix(e.err.Error(), "up: ")
}

func (e *fileRootError) Unwrap() error { return e.err }

// namespaceDir creates the file root of namespace below [SourceConfig].FileRoot (mode 0700,
// [ensurePrivateDir]), once per Source; nothing without a FileRoot. A refused directory is a
// *[fileRootError], tried again at the next call.
func (s *Source) namespaceDir(namespace string) error {
	if s.cfg.FileRoot == "" {
		return nil
	}
	s.mu.Lock()
	done := s.nsDirs[namespace]
	s.mu.Unlock()
	if done {
		return nil
	}
	k := fileRootDir
	if s.cfg.RunnerUID > 0 {
		k = k.forRunner(0o700, s.cfg.RunnerUID, s.cfg.RunnerGID)
	}
	if err := ensurePrivateDir(filepath.Join(s.cfg.FileRoot, namespace), k); err != nil {
		return &fileRootError{err}
	}
	s.mu.Lock()
	if s.nsDirs == nil {
		s.nsDirs = map[string]bool{}
	}
	s.nsDirs[namespace] = true
	s.mu.Unlock()
	return nil
}

// userAnnotations is annotations without the ones the file source sets.
func userAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if !internalAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

// submit observes obj with the watcher's [watcher.Observe] in this process's environment
// ([SourceConfig].Environment): a resource that failed because a provider or an engine was
// unavailable in another environment first gets [AnnotationRetryEnvironment], whose value is
// part of the trigger (a new pass), and once a ResourceObserved is published the environment is
// recorded in [AnnotationEnvironment].
func (s *Source) submit(ctx context.Context, obj *v1alpha1.LavaArchitecture) error {
	policy, err := watcher.EffectivePolicy(obj.Spec, nil)
	if err != nil {
		return fmt.Errorf("up: %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	key := obj.Namespace + "/" + obj.Name
	env := s.env
	if was := obj.Annotations[AnnotationEnvironment]; was != "" && was != env && unavailable(obj) {
		if obj, err = s.annotate(key, AnnotationRetryEnvironment, env); err != nil || obj == nil {
			return err
		}
	}
	var triggers []string
	if r := obj.Annotations[AnnotationRetryEnvironment]; r != "" {
		triggers = append(triggers, eventid.ReconcileTrigger("environment:"+r))
	}
	published, err := watcher.Observe(ctx, s.core, s.res, watcher.Observation{Object: obj, Policy: policy, Triggers: triggers, At: s.cfg.Now()})
	if err != nil || !published || obj.Annotations[AnnotationEnvironment] == env {
		return err
	}
	_, err = s.annotate(key, AnnotationEnvironment, env)
	return err
}

// unavailable reports whether obj failed because a provider or an engine was not available.
func unavailable(obj *v1alpha1.LavaArchitecture) bool {
	c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady)
	return obj.Status.Phase == v1alpha1.PhaseFailed && c != nil &&
		(c.Reason == v1alpha1.ReasonProviderUnavailable || c.Reason == "EngineUnavailable")
}

// annotate sets annotation k to v on the object key and writes it; it returns a copy of the
// object (nil when it is gone).
func (s *Source) annotate(key, k, v string) (*v1alpha1.LavaArchitecture, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objs[key]
	if cur == nil {
		return nil, nil
	}
	obj := cur.DeepCopy()
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[k] = v
	if err := s.writeLocked(obj); err != nil {
		return nil, err
	}
	return obj.DeepCopy(), nil
}

// remove starts the deletion of key: deletionTimestamp, then DeletionRequested once per
// generation ([watcher.Observe]).
func (s *Source) remove(ctx context.Context, key string) error {
	s.mu.Lock()
	cur := s.objs[key]
	if cur == nil {
		s.mu.Unlock()
		return nil
	}
	obj := cur.DeepCopy()
	if obj.DeletionTimestamp == nil {
		t := metav1.NewTime(s.cfg.Now().UTC().Truncate(time.Second))
		obj.DeletionTimestamp = &t
		if err := s.writeLocked(obj); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Unlock()
	_, err := watcher.Observe(ctx, s.core, s.res, watcher.Observation{Object: obj, At: s.cfg.Now()})
	return err
}

// rewrite maps inline-source positions in a phase event's message and diagnostics to the
// manifest ([CoreConfig].Rewrite).
func (s *Source) rewrite(key types.NamespacedName, ev *pipeline.Event, diags []string) {
	s.mu.Lock()
	mapInline := s.inline[key.String()]
	s.mu.Unlock()
	ev.Message = manifest.MapInlineText(ev.Message, mapInline)
	for i := range diags {
		diags[i] = manifest.MapInlineText(diags[i], mapInline)
	}
}

// HandlePhase folds one LAVA_PHASES message with the watcher's [watcher.Core.HandlePhase].
func (s *Source) HandlePhase(ctx context.Context, m *bus.Message) error {
	return s.core.HandlePhase(ctx, m)
}

// fileStore is the [watcher.Store] of lava up's files: the Source's objects, each written to
// its file under StatusDir. It has no conflicts: the Source and the core write one object at a
// time under the Source's lock.
type fileStore struct{ s *Source }

func (f fileStore) Get(_ context.Context, key types.NamespacedName) (*v1alpha1.LavaArchitecture, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	cur := f.s.objs[key.String()]
	if cur == nil {
		return nil, watcher.ErrGone
	}
	return cur.DeepCopy(), nil
}

// UpdateStatus sets status on the current object of obj's key (as the status subresource does:
// metadata and spec stay as they are now) and writes its file.
func (f fileStore) UpdateStatus(_ context.Context, obj *v1alpha1.LavaArchitecture, status v1alpha1.LavaArchitectureStatus) (*v1alpha1.LavaArchitecture, error) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	cur := f.s.objs[obj.Namespace+"/"+obj.Name]
	if cur == nil || cur.UID != obj.UID {
		return nil, watcher.ErrGone
	}
	next := cur.DeepCopy()
	next.Status = *status.DeepCopy()
	if err := f.s.writeLocked(next); err != nil {
		return nil, err
	}
	return next.DeepCopy(), nil
}

// Release removes the object and its file after Destroyed.
func (f fileStore) Release(_ context.Context, key types.NamespacedName, uid types.UID) error {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	cur := f.s.objs[key.String()]
	if cur == nil || (uid != "" && cur.UID != uid) {
		return nil
	}
	if err := os.Remove(f.s.objectPath(key.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("up: %w", err)
	}
	delete(f.s.objs, key.String())
	return nil
}

// RunPhases consumes LAVA_PHASES with the durable consumer "watcher" until ctx is done.
func (s *Source) RunPhases(ctx context.Context, bm *bus.Metrics) error {
	return s.core.Consume(ctx, s.cfg.JS, watcher.ConsumeOptions{Metrics: bm})
}

// WaitPhasesFolded waits until the phase consumer has nothing pending or unacknowledged on
// LAVA_PHASES (every phase event published so far is folded), polling every 50ms, or until
// ctx is done (then it returns ctx's error).
func (s *Source) WaitPhasesFolded(ctx context.Context) error {
	cons, err := s.cfg.JS.Consumer(ctx, bus.StreamPhases, bus.ServiceWatcher)
	if err != nil {
		return fmt.Errorf("up: phase consumer: %w", err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		info, err := cons.Info(ctx)
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Source) objectPath(key string) string {
	ns, name, _ := strings.Cut(key, "/")
	return filepath.Join(s.cfg.StatusDir, ns, statusFileName(name))
}

// statusFileName is the status file of the object name: NAME.yaml, or, for a name whose file
// (and its ".tmp" while written) would pass the 255-byte file name limit of common
// filesystems (a name may have 253 characters), its first 200 bytes, "_", 32 hex digits of
// the name's SHA-256, and ".yaml". A name never holds "_" (a DNS-1123 subdomain), so no name's
// NAME.yaml is another name's cut one: one object never writes or removes another's file.
func statusFileName(name string) string {
	if len(name)+len(".yaml.tmp") <= 255 {
		return name + ".yaml"
	}
	sum := sha256.Sum256([]byte(name))
	return name[:200] + "_" + hex.EncodeToString(sum[:16]) + ".yaml"
}

// legacyStatusFileName is the cut status file name earlier versions wrote for a long name
// (first 200 bytes, "-", 16 hex digits): a short name could equal it. [Source.load] renames
// such a file to [statusFileName].
func legacyStatusFileName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return name[:min(len(name), 200)] + "-" + hex.EncodeToString(sum[:8]) + ".yaml"
}

// writeLocked stores obj in memory and writes its file (atomically). s.mu is held.
func (s *Source) writeLocked(obj *v1alpha1.LavaArchitecture) error {
	key := obj.Namespace + "/" + obj.Name
	out := obj.DeepCopy()
	out.APIVersion, out.Kind = v1alpha1.GroupVersion.String(), "LavaArchitecture"
	data, err := sigsyaml.Marshal(out)
	if err != nil {
		return fmt.Errorf("up: encode %s: %w", key, err)
	}
	p := s.objectPath(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	s.objs[key] = obj
	return nil
}

// newUID is a random RFC 4122 version 4 UUID, as the API server assigns.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
