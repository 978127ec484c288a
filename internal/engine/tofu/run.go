package tofu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// tailBuffer keeps the last max bytes written to it (stdout and stderr of one step), and
// whether the Go runtime of the CLI said it ran out of memory (its message comes first, before
// a goroutine dump far longer than the tail).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	oom bool
}

// outOfMemory are the Go runtime's messages for an allocation refused (RLIMIT_DATA) or
// impossible: its throw("runtime: cannot allocate memory"), throw("runtime: out of memory")
// and throw("out of memory"...) (the mallocs and arenas of runtime/malloc.go; a plan that
// ended with it was read as one with changes, and its missing plan file was the error).
var outOfMemory = [][]byte{[]byte("fatal error: runtime: cannot allocate memory"), []byte("fatal error: runtime: out of memory"),
	[]byte("fatal error: out of memory")}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if !t.oom {
		window := t.b[max(0, len(t.b)-len(p)-64):]
		for _, m := range outOfMemory {
			t.oom = t.oom || bytes.Contains(window, m)
		}
	}
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// outOfMemory reports whether the output said the CLI ran out of memory.
func (t *tailBuffer) outOfMemory() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.oom
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func (t *tailBuffer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b, t.oom = t.b[:0], false
}

// outputKeep is how much of a step's output is kept for classification and the tail.
const outputKeep = 64 << 10

// run is one operation in one workspace.
type run struct {
	e   *Engine
	key state.Key
	dir string
	// tmp is the operation's private TMPDIR (mode 0700), outside dir: see newRun.
	tmp string
	tf  *tfexec.Terraform
	out *tailBuffer
	red *engine.Redactor
	// revoke ends the operation's backend password (BackendTokens).
	revoke func()
	// env is the CLI's environment (NAME=value), for the runs Lava starts itself; holder
	// its state lock holder (TF_HTTP_USERNAME).
	env    []string
	holder string
	// inRunDir: dir is the object's run directory (apply, destroy), not a workspace of
	// its own; detached: a CLI run there outlived the operation (see runMutating).
	inRunDir, detached bool
	// made are the objects the last mutating run's output says it created ([planStream].made).
	made []madeObject
	// sensitive: the workspace's configuration has sensitive values (prepare), so a failed
	// step's output tail keeps only the diagnostics' summaries and positions (summariesOnly).
	sensitive bool
}

// newRun creates a fresh workspace directory (mode 0700) and a CLI handle on it, whose
// environment carries creds (the object's provider credentials, written into the workspace;
// nil: none) and nothing of the applier's own. With o (apply, destroy) the workspace is the
// object's run directory, emptied first; else a new directory under WorkDir.
func (e *Engine) newRun(op string, key state.Key, holder string, redact []string, creds *credentials.Provider, o *objectDir) (*run, error) {
	if err := e.runnable(op, redact, creds); err != nil {
		return nil, err
	}
	var dir string
	var err error
	if o != nil {
		dir, err = o.freshRunDir()
	} else {
		dir, err = os.MkdirTemp(e.cfg.WorkDir, "lava-"+op+"-")
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: workspace: %w", e.cfg.Name, op, err)
	}
	// TMPDIR is a private directory of its own under the system's temporary directory, as the
	// embedded engine gives its providers (internal/engine/embedded startProvider): a provider
	// plugin listens on a unix socket in TMPDIR, and a socket path is limited to 107 bytes, so
	// under a deep WorkDir every provider would fail its handshake ("Failed to read any lines
	// from plugin's stdout") [TestEngine_deepWorkDir].
	tmp, err := os.MkdirTemp("", "lava-tmp-")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%s %s: temporary directory: %w", e.cfg.Name, op, err)
	}
	bin, limitEnv := e.cliCommand()
	tf, err := tfexec.NewTerraform(dir, bin)
	if err != nil {
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("%s %s: %w", e.cfg.Name, op, err)
	}
	if holder == "" {
		holder = "lava"
	}
	// A scrubbed environment: nothing of the applier's own (its credentials, tokens) reaches
	// tofu or the providers it starts (docs/security.md, "Engines"); HOME is the
	// operation's private workspace, TMPDIR its private temporary directory. The object's credentials come first, so nothing Lava sets
	// below can be replaced by them.
	credEnv, err := creds.Environ(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("%s %s: %w", e.cfg.Name, op, err)
	}
	env := map[string]string{}
	for _, kv := range credEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["HOME"], env["TMPDIR"] = dir, tmp
	if p, ok := os.LookupEnv("PATH"); ok {
		env["PATH"] = p
	}
	maps.Copy(env, e.cfg.Env)
	env["TF_CLI_CONFIG_FILE"] = e.cliConfig
	if e.usesCache() {
		env["TF_PLUGIN_CACHE_DIR"] = e.cfg.PluginCacheDir
	}
	env["CHECKPOINT_DISABLE"] = "1"
	addr := state.Address(e.cfg.BackendURL, key)
	env["TF_HTTP_ADDRESS"] = addr
	env["TF_HTTP_LOCK_ADDRESS"] = addr
	env["TF_HTTP_UNLOCK_ADDRESS"] = addr
	env["TF_HTTP_USERNAME"] = holder
	password, revoke := e.cfg.BackendPassword, func() {}
	if e.cfg.BackendTokens != nil {
		tok := e.cfg.BackendTokens.Issue(key)
		password, revoke = tok, func() { e.cfg.BackendTokens.Revoke(tok) }
	}
	env["TF_HTTP_PASSWORD"] = password
	// What terraform-exec sets for the commands it runs, for those Lava runs itself.
	env["TF_IN_AUTOMATION"] = "1"
	maps.Copy(env, limitEnv)
	environ := make([]string, 0, len(env))
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	if err := tf.SetEnv(tfexec.CleanEnv(env)); err != nil {
		revoke()
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("%s %s: environment: %w", e.cfg.Name, op, err)
	}
	out := &tailBuffer{max: outputKeep}
	tf.SetStdout(out)
	tf.SetStderr(out)
	red := engine.NewRedactor(redact...)
	red.Add(creds.Secrets()...)
	if password != "" {
		red.Add(password)
	}
	return &run{e: e, key: key, dir: dir, tmp: tmp, tf: tf, out: out, red: red, revoke: revoke, env: environ,
		holder: holder, inRunDir: o != nil}, nil
}

// runnable checks what a run needs before it starts: the CLI binary ([Engine.present]), and
// redaction values (redact and the credentials' secrets) within engine.CheckSecretBytes: the
// run's messages are redacted of them, and the redactor costs hundreds of bytes per byte of
// them, so they are bounded as a Secret binding is (a sensitive output of the state built from
// 9 MB of control bytes cost 4 GB for every later run).
func (e *Engine) runnable(op string, redact []string, creds *credentials.Provider) error {
	if err := e.present(); err != nil {
		return err
	}
	vals := append(slices.Clone(redact), creds.Secrets()...)
	slices.Sort(vals)
	if err := engine.CheckSecretBytes(slices.Compact(vals)); err != nil { // each distinct value once
		return fmt.Errorf("%s %s: %w", e.cfg.Name, op, err)
	}
	return nil
}

// close ends the run: the backend password is revoked and the workspace and TMPDIR removed,
// except that a detached run keeps them until its CLI exits (runMutating), and a run
// directory keeps an errored.tfstate for the next operation's recovery (objectDir.recover).
func (r *run) close() {
	if r.detached {
		return
	}
	if r.revoke != nil {
		r.revoke()
	}
	_ = os.RemoveAll(r.tmp)
	if !r.inRunDir {
		_ = os.RemoveAll(r.dir)
		return
	}
	ents, _ := os.ReadDir(r.dir)
	for _, en := range ents {
		if en.Name() != erroredState {
			_ = os.RemoveAll(filepath.Join(r.dir, en.Name()))
		}
	}
}

// step runs f with a timeout, classifying a failure.
func (r *run) step(ctx context.Context, name string, timeout time.Duration, f func(ctx context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if name != "init" && r.e.usesCache() {
		r.e.cacheRW.RLock()
		defer r.e.cacheRW.RUnlock()
	}
	r.out.Reset()
	start := time.Now()
	err := f(sctx)
	if err == nil && r.out.outOfMemory() {
		// The Go runtime's fatal error exits with status 2, which `plan -detailed-exitcode`
		// means "succeeded, with changes".
		err = errors.New("the CLI crashed")
	}
	r.e.cfg.Logger.DebugContext(ctx, "engine step", "engine", r.e.cfg.Name, "resource", r.key.String(),
		"step", name, "duration", time.Since(start), "ok", err == nil)
	if err == nil {
		return nil
	}
	return r.unsaved(ctx, name, err, r.classify(ctx, name, timeout, sctx, err))
}

// unsaved returns classified, the error of step name, unless the step is an apply whose CLI
// died without saving its state (killed by a signal: at its CPU limit, or at its
// timeout after the grace of its interrupt; or out of memory). Then the error also wraps
// [engine.ErrApplyInterrupted] and names the objects the run made and those of them the stored
// state lacks, so that they are imported or removed rather than made a second time. (A destroy
// killed so leaves objects in the state that it deleted, which the next plan's refresh finds
// gone.)
func (r *run) unsaved(ctx context.Context, name string, cliErr, classified error) error {
	if _, signaled := killed(cliErr); name != "apply" || (!signaled && !r.out.outOfMemory()) {
		return classified
	}
	what := "any objects it made since it started may be missing from the state"
	if len(r.made) > 0 {
		made := make([]string, len(r.made))
		for i, m := range r.made {
			made[i] = m.String()
		}
		what = "it made " + strings.Join(made, ", ")
		if missing := r.missing(ctx); len(missing) > 0 {
			what += "; the stored state lacks " + strings.Join(missing, ", ")
		}
	}
	step, tail, inner := name, "", classified
	if se, ok := classified.(*engine.StepError); ok {
		step, tail, inner = se.Step, se.Tail, se.Err
	}
	return &engine.StepError{Step: step, Tail: tail, Err: fmt.Errorf("%w; the CLI was stopped before it saved its state, %s: %w",
		inner, r.red.Redact(what), engine.ErrApplyInterrupted)}
}

// missing lists the addresses of r.made that the stored state has no managed instance at;
// nil when the state cannot be read.
func (r *run) missing(ctx context.Context) []string {
	_, body, err := r.e.cfg.Store.Body(context.WithoutCancel(ctx), r.key)
	var have []string
	if err == nil {
		if have, err = state.ManagedInstances(body); err != nil {
			return nil
		}
	} else if !errors.Is(err, state.ErrNotFound) {
		return nil
	}
	var out []string
	for _, m := range r.made {
		if !slices.Contains(have, m.addr) {
			out = append(out, m.addr)
		}
	}
	return out
}

// killed returns the exit state of a CLI run whose error is its exit, and whether a signal
// ended it (wait(2)'s WIFSIGNALED).
func killed(err error) (*os.ProcessState, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState == nil {
		return nil, false
	}
	ws, ok := ee.ProcessState.Sys().(syscall.WaitStatus)
	return ee.ProcessState, ok && ws.Signaled()
}

var (
	notFoundRe   = regexp.MustCompile(`provider ((?:[\w.-]+/)?[\w.-]+/[\w.-]+) was not found`)
	forProvider  = regexp.MustCompile(`(?:for|of) provider ((?:[\w.-]+/)?[\w.-]+/[\w.-]+)`)
	checksumRe   = regexp.MustCompile(`(?:does\s+not|doesn't)\s+match\s+any\s+of\s+the\s+checksums\s+(?:previously\s+)?recorded\s+in\s+the\s+dependency\s+lock\s+file`)
	lockErrText  = "Error acquiring the state lock"
	staleErrText = "Saved plan is stale"
)

// classify turns a step failure into a typed error with a redacted output tail.
func (r *run) classify(ctx context.Context, name string, timeout time.Duration, sctx context.Context, err error) error {
	text := r.out.String() + "\n" + err.Error()
	out := r.out.String()
	if r.sensitive {
		out = summariesOnly(out)
	}
	tail := engine.Tail(r.red.Redact(out), r.e.cfg.TailBytes)
	switch {
	case errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return &engine.StepError{Step: name, Tail: tail, Err: &engine.StepTimeoutError{Engine: r.e.cfg.Name, Step: name, After: timeout}}
	case ctx.Err() != nil:
		return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: %w", r.e.cfg.Name, name, ctx.Err())}
	case checksumRe.MatchString(text):
		// The CLI refused a provider package whose hash is not in the dependency lock Lava
		// gave it (the object's lock): the package was not used.
		return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: %s: %w", r.e.cfg.Name, name,
			r.red.Redact(errorSummary(text)), engine.ErrProviderChecksumMismatch)}
	case strings.Contains(text, "Failed to query available provider packages") ||
		strings.Contains(text, "Failed to install provider") || notFoundRe.MatchString(text):
		return &engine.ProviderUnavailableError{Sources: providerSources(text), Where: r.e.cfg.MirrorDir,
			Detail: r.red.Redact(errorSummary(text))}
	case strings.Contains(text, lockErrText):
		if rec, gerr := r.e.cfg.Store.Get(ctx, r.key); gerr == nil && rec.Lock != nil {
			return fmt.Errorf("%s %s: %w", r.e.cfg.Name, name, &state.LockedError{Key: r.key, Lock: *rec.Lock})
		}
		return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: %w", r.e.cfg.Name, name, engine.ErrLocked)}
	case r.out.outOfMemory():
		// Its memory limit (Config.MaxMemoryBytes): an expression of the configuration asks for
		// more; another attempt would ask again. Its goroutine dump is no tail.
		r.releaseDeadLock(ctx)
		return &engine.StepError{Step: name, Tail: "fatal error: runtime: cannot allocate memory", Err: fmt.Errorf("%s %s: the CLI ran out of memory under its limit of %d bytes (an expression builds a value too large): %w",
			r.e.cfg.Name, name, r.e.cfg.MaxMemoryBytes, engine.ErrEvaluationLimit)}
	case r.cpuExhausted(err):
		r.releaseDeadLock(ctx)
		return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: the CLI was killed at its CPU limit of %d s (an expression takes too long, such as a bcrypt cost over 12): %w",
			r.e.cfg.Name, name, r.e.cfg.MaxCPUSeconds, engine.ErrEvaluationLimit)}
	case strings.Contains(text, staleErrText):
		return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: %w", r.e.cfg.Name, name, engine.ErrPlanStale)}
	}
	// The CLI's first error summary says what failed; its exit status says nothing.
	msg := errorSummary(out)
	if msg == "" {
		msg = strings.TrimSpace(strings.SplitN(err.Error(), "\n", 2)[0])
	}
	return &engine.StepError{Step: name, Tail: tail, Err: fmt.Errorf("%s %s: %s", r.e.cfg.Name, name, r.red.Redact(msg))}
}

// releaseDeadLock releases the state lock a CLI that died at one of its limits held as this
// run's holder, so the object's next operation need not wait for the lock's age: the CLI
// exited, and one object has one operation at a time.
func (r *run) releaseDeadLock(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if rec, err := r.e.cfg.Store.Get(ctx, r.key); err == nil && rec.Lock != nil && rec.Lock.Holder == r.holder {
		_ = r.e.cfg.Store.Unlock(ctx, r.key, rec.Lock.ID, false)
	}
}

// cpuExhausted reports whether err is the exit of a CLI the kernel killed at its CPU limit
// (Config.MaxCPUSeconds): killed by a signal after using about that much CPU.
func (r *run) cpuExhausted(err error) bool {
	ps, signaled := killed(err)
	if r.e.self == "" || r.e.cfg.MaxCPUSeconds <= 0 || !signaled {
		return false
	}
	used := ps.UserTime() + ps.SystemTime()
	// The usage wait4 reports runs short of what the kernel held to the limit (119.0 s of
	// user and system time for a process killed at 120 s): nine tenths of it.
	return used >= time.Duration(r.e.cfg.MaxCPUSeconds)*time.Second*9/10
}

// summariesOnly keeps of the CLI's human output only each diagnostic's "Error:" or "Warning:"
// line and its "with"/"on" position lines, each diagnostic's detail replaced by hiddenDetail:
// in a configuration with sensitive values, HCL's and OpenTofu's details, and the source line
// and values a diagnostic shows, may quote a value derived from a Secret binding (an apply-time
// "Duplicate object key" error does). The plan step's diagnostics
// are filtered as they are read (planStream).
func summariesOnly(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimLeft(l, " │╷╵")
		switch {
		case strings.HasPrefix(t, "Error: "), strings.HasPrefix(t, "Warning: "):
			b.WriteString(t + "\n" + hiddenDetail + "\n")
		case positionLine.MatchString(t):
			b.WriteString("  " + t + "\n")
		}
	}
	return b.String()
}

// positionLine is a diagnostic's position in the CLI's human output ("on main.tf.json line 1,
// in resource.terraform_data.d:", "with terraform_data.d,"); a wrapped line of detail text that
// happens to start with "on " does not match.
var positionLine = regexp.MustCompile(`^(on [^ ]+ line [0-9]+(, in [^ ]+)?:|with [^ ]+,)$`)

// providerSources extracts "hashicorp/aws" style sources from init output.
func providerSources(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, re := range []*regexp.Regexp{notFoundRe, forProvider} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			src := m[1]
			if parts := strings.Split(src, "/"); len(parts) == 3 {
				src = parts[1] + "/" + parts[2]
			}
			if !seen[src] {
				seen[src] = true
				out = append(out, src)
			}
		}
	}
	if len(out) == 0 {
		out = []string{"(unknown)"}
	}
	return out
}

// errorSummary returns the first "Error: ..." line of CLI output, and the "not found in any
// of the search locations" reason when the output has it.
func errorSummary(text string) string {
	var sum string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Error: "); ok {
			sum = rest
			break
		}
	}
	if strings.Contains(strings.Join(strings.Fields(text), " "), "was not found in any of the search locations") {
		sum += " (not found in any of the search locations)"
	}
	return strings.TrimSpace(sum)
}

// present checks that the CLI binary is there: a missing one is an [*unavailableError]
// (lava up offers the tofu engine while `make tools-tofu` builds it), checked before every run
// so that the binary may appear while the engine is open.
func (e *Engine) present() error {
	// A bare name is looked up in PATH, as the CLI is started.
	if _, err := exec.LookPath(e.cfg.Bin); errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &unavailableError{name: e.cfg.Name, bin: e.cfg.Bin}
	}
	return nil
}

// unavailableError is a CLI engine whose binary is not there; it wraps
// [engine.ErrEngineUnavailable].
type unavailableError struct{ name, bin string }

func (e *unavailableError) Error() string {
	return fmt.Sprintf("engine %s is not available: its binary %s is not there (yet)", e.name, e.bin)
}

// Unwrap returns [engine.ErrEngineUnavailable].
func (e *unavailableError) Unwrap() error { return engine.ErrEngineUnavailable }
