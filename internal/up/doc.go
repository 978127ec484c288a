// Package up is `lava up`, the embedded default: the composition root that runs an in-process
// NATS JetStream server with its file store under a state directory, the JetStream topology,
// and every Lava service (synth, applier, drift, viggy, anomaly, attest) in one process, built
// from the same internal packages as the service binaries, and the terminal UI.
//
// [Run] is a sequence of named steps (steps.go): prepare and lock the state directory, create
// the keys, start the bus, start the services, start the source, drive the display, finish.
// Each service runs through its own Run with the defaults of its own flag set (its Flags
// registered on a fresh flag set, nothing parsed), overridden only where lava up must: the bus
// identity and logs, the keys and the RPCs on loopback, the holder, the engines' directories
// and the tenant policy, the cluster.
//
// Without a kubeconfig a file source plays the watcher's role ([Source]): LavaArchitecture
// manifests are read from files and directories by internal/manifest (decoded with positions
// and checked against the CRD as the API server checks them; at most 1 MiB per file,
// [manifest.MaxFileBytes]), read again only when a file changed ([manifest.Reader]), and each
// resource is kept as an object file under <state-dir>/status/<namespace>/<name>.yaml (a name
// too long for a file name is cut and given a hash, in a form no name can take:
// statusFileName) (metadata with a random uid per incarnation and a generation bumped on every
// spec change, the spec, and the status). An object belongs to the file that created it
// ([AnnotationFile]): a namespace/name defined in two files is an error of both documents and
// changes nothing, and another file's document never updates it; it becomes a new object,
// with a new uid, once the old one is destroyed (docs/design/0024-file-source-identity-and-roots.md).
// The source hands each object to the watcher's own [watcher.Observe], which publishes
// ResourceObserved and, for a removed document, DeletionRequested (the object file goes after
// Destroyed), and fails an object whose ResourceObserved is larger than the bus takes (reason
// SpecTooLarge, with the sizes: a huge inline source or bindings under the file limit); the
// watcher's own [watcher.Core] folds the phase events into status over the file store, which
// writes every fold at once. An object is observed again only when its document changed, at the
// first scan after a start, or, alone, at the scan after its observation failed, so an object
// that fails at every scan does not make every scan observe every object ([Source.Scan]). With a kubeconfig the watcher itself runs against
// that cluster instead. A resource that failed because a provider or an engine was missing gets
// one new pass when a later run has a different provider mirror or engines
// ([AnnotationRetryEnvironment]).
//
// Without a policy document, each namespace writes files only below its own root,
// <file-root>/<namespace> ([NamespaceRootsPolicy]; [Options].FileRoot, default [DemoDir]),
// below a directory lava up creates with mode 0700 and refuses when it is a symbolic link,
// another user's or open to others.
//
// The terminal shows a table of resource, phase, engine, resources and last change, and a
// progress line while an engine works: redrawn in place when stdout is a terminal, one line
// per transition otherwise.
package up
