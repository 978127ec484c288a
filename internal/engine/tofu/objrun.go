package tofu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/uuid"
	"github.com/prometheus/procfs"

	"github.com/lava-operator/lava/internal/engine"
	"github.com/lava-operator/lava/internal/engine/state"
)

// Per-object run directories (docs/design/0019-tofu-apply-survives-a-dead-applier.md).
//
// The CLI persists state only at the end of an apply or destroy (and at most every 20 seconds
// during a long one), so a CLI that dies with its applier forgets the resources it created
// since, and the next apply creates them again. Lava therefore starts the mutating runs itself
// ([run.runMutating]): in a process group of its own, without a parent-death signal, with its
// output in a file, in the object's run directory <WorkDir>/objects/<hash of the key>/run. An
// applier's death leaves the CLI running; it finishes and writes its state, to the backend
// when that is still reachable, else to errored.tfstate in the run directory. The run's pid
// and start time are recorded in <object dir>/tofu.pid. Every plan, apply and destroy of the
// object first takes the object's lock (an flock on <object dir>/lock) and then, with
// [objectDir.recover], waits for a recorded CLI that still runs and brings its errored.tfstate
// into the state store, so the plan that follows sees what the CLI created.

// File names in an object directory.
const (
	objectsDir   = "objects"
	runDirName   = "run"
	pidFileName  = "tofu.pid"
	objLockName  = "lock"
	erroredState = "errored.tfstate"
	outputFile   = "lava-cli.out"
)

// orphanPoll is how often a wait for an orphaned CLI run checks whether it still runs.
const orphanPoll = 200 * time.Millisecond

// interruptGrace is how long a timed-out mutating run is given to stop after SIGINT (to
// finish its in-flight provider calls and write its state) before its process group is
// SIGKILLed: engine.InterruptGrace, terraform-exec's default WaitDelay.
const interruptGrace = engine.InterruptGrace

// objectDir is an object's directory under WorkDir, locked by this operation.
type objectDir struct {
	e    *Engine
	key  state.Key
	path string
	fl   *flock.Flock
}

// pidRecord is <object dir>/tofu.pid: the CLI run started in the object's run directory.
type pidRecord struct {
	// PID and Start identify the process: Start is its start time in clock ticks after boot
	// (field 22 of /proc/PID/stat, proc(5)), so a reused pid is not taken for the run.
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	// Op is "apply" or "destroy"; Started when (UTC).
	Op      string    `json:"op"`
	Started time.Time `json:"started"`
	// Tmp is the run's private TMPDIR (removed once the run ended).
	Tmp string `json:"tmp,omitempty"`
	// Holder is the run's state lock holder (TF_HTTP_USERNAME); StartDigest the digest of the
	// stored state the run started from ("" for none). Together they tell whether anyone
	// else can have written the state since (recoverErrored).
	Holder      string `json:"holder"`
	StartDigest string `json:"startDigest,omitempty"`
}

// objectPath is the object's directory: <WorkDir>/objects/<first 16 bytes of the SHA-256 of
// "namespace/name", hex>.
func (e *Engine) objectPath(key state.Key) string {
	sum := sha256.Sum256([]byte(key.String()))
	return filepath.Join(e.cfg.WorkDir, objectsDir, hex.EncodeToString(sum[:16]))
}

// openObject takes the object's lock (waiting, until ctx ends, for another operation on the
// object under the same WorkDir), then recovers what an orphaned CLI run left
// ([objectDir.recover]); holder names the recovery's state lock. The caller unlocks.
func (e *Engine) openObject(ctx context.Context, key state.Key, holder string) (*objectDir, error) {
	p := e.objectPath(key)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return nil, fmt.Errorf("%s: object directory: %w", e.cfg.Name, err)
	}
	fl := flock.New(filepath.Join(p, objLockName))
	if ok, err := fl.TryLockContext(ctx, 50*time.Millisecond); err != nil || !ok {
		return nil, fmt.Errorf("%s: lock of %s: %w", e.cfg.Name, p, errors.Join(err, ctx.Err()))
	}
	o := &objectDir{e: e, key: key, path: p, fl: fl}
	if err := o.recover(ctx, holder); err != nil {
		o.unlock()
		return nil, err
	}
	return o, nil
}

func (o *objectDir) unlock() { _ = o.fl.Unlock() }

// orphanPending returns an error wrapping engine.ErrRecoveryPending when key's object
// directory holds something [Engine.openObject] would recover (a speculative plan recovers
// nothing): the recorded CLI run still runs, or it left an errored.tfstate. nil otherwise. It
// takes no lock: a run that starts meanwhile plans against a state the preview also read.
func (e *Engine) orphanPending(key state.Key) error {
	o := &objectDir{e: e, key: key, path: e.objectPath(key)}
	pending := ""
	if b, err := os.ReadFile(o.pidPath()); err == nil {
		var rec pidRecord
		if json.Unmarshal(b, &rec) == nil && alive(rec.PID, rec.Start) {
			pending = fmt.Sprintf("the %s run %d of another applier still runs on %s", rec.Op, rec.PID, key)
		}
	}
	if _, err := os.Stat(filepath.Join(o.runDir(), erroredState)); err == nil {
		pending = fmt.Sprintf("a state a CLI run on %s could not store waits in its run directory", key)
	}
	if pending == "" {
		return nil
	}
	return fmt.Errorf("%s: %w: %s (the next plan of the object recovers it)", e.cfg.Name, engine.ErrRecoveryPending, pending)
}

func (o *objectDir) runDir() string  { return filepath.Join(o.path, runDirName) }
func (o *objectDir) pidPath() string { return filepath.Join(o.path, pidFileName) }

// freshRunDir empties the run directory for a new run (mode 0700).
func (o *objectDir) freshRunDir() (string, error) {
	d := o.runDir()
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	return d, os.Mkdir(d, 0o700)
}

// recover waits for the recorded CLI run to end if it still runs (no timeout of its own:
// until ctx ends), then brings an errored.tfstate it left into the state store and empties
// the run directory.
func (o *objectDir) recover(ctx context.Context, holder string) error {
	run, err := o.waitOrphan(ctx)
	if err != nil {
		return err
	}
	if err := o.recoverErrored(ctx, run, holder); err != nil {
		return err
	}
	if err := os.Remove(o.pidPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", o.e.cfg.Name, err)
	}
	if err := os.RemoveAll(o.runDir()); err != nil {
		return fmt.Errorf("%s: run directory: %w", o.e.cfg.Name, err)
	}
	return nil
}

// waitOrphan waits while the run recorded in tofu.pid is alive, then removes the run's
// TMPDIR; it returns the record (nil without one). The caller removes the record once the
// run's errored.tfstate is dealt with.
func (o *objectDir) waitOrphan(ctx context.Context) (*pidRecord, error) {
	b, err := os.ReadFile(o.pidPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", o.e.cfg.Name, o.pidPath(), err)
	}
	var rec pidRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		// Not a record Lava wrote whole (it renames a complete file into place): no run to
		// wait for.
		o.e.cfg.Logger.WarnContext(ctx, "unreadable CLI run record, ignored", "engine", o.e.cfg.Name,
			"resource", o.key.String(), "path", o.pidPath(), "error", err.Error())
		return nil, nil
	}
	if alive(rec.PID, rec.Start) {
		log := o.e.cfg.Logger.With("engine", o.e.cfg.Name, "resource", o.key.String(), "pid", rec.PID,
			"op", rec.Op, "started", rec.Started)
		log.WarnContext(ctx, "waiting for the CLI run of a dead applier to end (it has no timeout of its own: SIGINT ends it and has it write its state)")
		began := time.Now()
		t := time.NewTicker(orphanPoll)
		defer t.Stop()
		for alive(rec.PID, rec.Start) {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%s: waiting for the CLI run %d of a dead applier (%s since %s): %w", o.e.cfg.Name,
					rec.PID, rec.Op, rec.Started.Format(time.RFC3339), ctx.Err())
			case <-t.C:
			}
		}
		log.InfoContext(ctx, "the CLI run of a dead applier ended", "waited", time.Since(began).Round(time.Millisecond))
	}
	if rec.Tmp != "" && strings.HasPrefix(filepath.Base(rec.Tmp), "lava-tmp-") {
		_ = os.RemoveAll(rec.Tmp)
	}
	return &rec, nil
}

// writePID records a started run (written whole, then renamed into place).
func (o *objectDir) writePID(rec pidRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := o.pidPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, o.pidPath())
}

// recoverErrored stores the errored.tfstate a run left in the run directory (the CLI writes
// it there when it cannot persist its final state): when there is no stored state, or it has
// the stored state's lineage and a serial not below the stored one and nobody but the run can
// have written the stored state since the run began (the state is still locked by the run's
// holder, or it is the state the run started from), it is stored under a state lock of its
// own as the stored serial + 1 and removed. Anything else (another lineage, an older serial,
// a state another holder may have written, not a state v4 body) is moved aside to
// <object dir>/conflict-<UTC time>.tfstate and logged at ERROR: never dropped, never written
// over a newer state. A state lock that cannot be taken (held by a live holder) fails the
// operation and keeps the file for the next. run is the run's record (nil when none was
// written).
func (o *objectDir) recoverErrored(ctx context.Context, run *pidRecord, holder string) error {
	path := filepath.Join(o.runDir(), erroredState)
	body, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: read %s: %w", o.e.cfg.Name, path, err)
	}
	name := o.e.cfg.Name
	cur, err := o.e.cfg.Store.Get(ctx, o.key)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if !cur.HasState() {
		// The first apply's state never reached the backend, which is where the CLI would
		// have given it its lineage: errored.tfstate has none (measured with OpenTofu 1.12).
		if body, err = withLineage(body); err != nil {
			return o.moveAside(ctx, path, state.Header{}, cur, err.Error())
		}
	}
	h, err := state.ParseHeader(body)
	if err != nil {
		return o.moveAside(ctx, path, h, cur, err.Error())
	}
	if cur.HasState() {
		switch {
		case h.Lineage != cur.Lineage:
			return o.moveAside(ctx, path, h, cur, "another lineage than the stored state's")
		case h.Serial < cur.Serial:
			return o.moveAside(ctx, path, h, cur, "an older serial than the stored state's")
		case run == nil:
			return o.moveAside(ctx, path, h, cur, "no record of the run that wrote it")
		case (cur.Lock == nil || cur.Lock.Holder != run.Holder) && cur.Digest != run.StartDigest:
			return o.moveAside(ctx, path, h, cur, "the stored state changed since the run began, and not under the run's lock")
		}
		if body, err = withSerial(body, cur.Serial+1); err != nil {
			return o.moveAside(ctx, path, h, cur, err.Error())
		}
	}
	if holder == "" {
		holder = "lava"
	}
	id := uuid.NewString()
	if _, err := o.e.cfg.Store.Lock(ctx, o.key, state.Lock{ID: id, Holder: holder, Operation: "LavaRecoverErroredState",
		Who: "lava", Info: "errored.tfstate of a CLI run whose applier died"}); err != nil {
		return fmt.Errorf("%s: recover %s: %w", name, path, err)
	}
	rec, perr := o.e.cfg.Store.Put(ctx, o.key, body, id)
	uerr := o.e.cfg.Store.Unlock(ctx, o.key, id, false)
	if errors.Is(perr, state.ErrConflict) {
		// The stored state moved on between the check and the write.
		return errors.Join(o.moveAside(ctx, path, h, cur, perr.Error()), uerr)
	}
	if perr != nil {
		return errors.Join(fmt.Errorf("%s: recover %s: %w", name, path, perr), uerr)
	}
	if err := os.Remove(path); err != nil {
		return errors.Join(err, uerr)
	}
	o.e.cfg.Logger.WarnContext(ctx, "recovered the state a CLI run wrote to errored.tfstate after its applier died",
		"engine", name, "resource", o.key.String(), "lineage", h.Lineage, "errored_serial", h.Serial,
		"stored_serial", cur.Serial, "serial", rec.Serial)
	return uerr
}

// moveAside renames an errored.tfstate that cannot be stored to conflict-<UTC time>.tfstate
// in the object directory, logged at ERROR with why.
func (o *objectDir) moveAside(ctx context.Context, path string, h state.Header, cur state.Record, why string) error {
	to := filepath.Join(o.path, "conflict-"+time.Now().UTC().Format("20060102T150405.000000000Z")+".tfstate")
	if err := os.Rename(path, to); err != nil {
		return fmt.Errorf("%s: move %s aside: %w", o.e.cfg.Name, path, err)
	}
	o.e.cfg.Logger.ErrorContext(ctx, "the state a CLI run wrote to errored.tfstate after its applier died conflicts with the stored state: kept aside, not stored",
		"engine", o.e.cfg.Name, "resource", o.key.String(), "path", to, "why", why,
		"lineage", h.Lineage, "serial", h.Serial, "stored_lineage", cur.Lineage, "stored_serial", cur.Serial)
	return nil
}

// withLineage returns a state body with a new lineage (a UUID, as the CLI makes) when its
// top-level "lineage" is empty or missing.
func withLineage(body []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var lin string
	if raw, ok := doc["lineage"]; ok {
		if err := json.Unmarshal(raw, &lin); err != nil {
			return nil, err
		}
	}
	if lin != "" {
		return body, nil
	}
	b, _ := json.Marshal(uuid.NewString())
	doc["lineage"] = b
	return json.MarshalIndent(doc, "", "  ")
}

// withSerial returns a state body with its top-level "serial" replaced.
func withSerial(body []byte, serial uint64) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	doc["serial"] = json.RawMessage(strconv.FormatUint(serial, 10))
	return json.MarshalIndent(doc, "", "  ")
}

// procStat returns a process's state letter and start time in clock ticks after boot (fields 3
// and 22 of /proc/PID/stat, proc(5), read with prometheus/procfs).
func procStat(pid int) (string, uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "", 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return "", 0, err
	}
	return st.State, st.Starttime, nil
}

// alive reports whether process pid runs and started at start (a zombie, or a reused pid,
// does not).
func alive(pid int, start uint64) bool {
	st, s, err := procStat(pid)
	return err == nil && s == start && st != "Z" && st != "X"
}

// runMutating runs a CLI command that changes state (apply, destroy) in the object's run
// directory, with the run's environment, detached from this process's lifetime: a process
// group of its own (Setpgid), no parent-death signal, stdin /dev/null, stdout and stderr to
// a file in the run directory (so no pipe breaks when this process dies), its pid recorded
// in the object directory with holder (its state lock holder) and startDigest (the digest of
// the stored state it starts from). Its output tail goes to r.out. When sctx ends (the step
// timeout, or ctx, the operation's, ends) the CLI gets SIGINT and [interruptGrace] to stop;
// after that a timed-out run's process group gets SIGKILL, while a run whose operation was
// given up is left running, orphaned: this returns ctx's error, the backend password is
// revoked and the TMPDIR removed when the CLI exits, and the next operation on the object
// waits for it ([objectDir.recover]).
func (r *run) runMutating(ctx, sctx context.Context, o *objectDir, op, holder, startDigest string, args ...string) error {
	out, err := os.OpenFile(filepath.Join(r.dir, outputFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	bin, _ := r.e.cliCommand() // its environment is in r.env
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.dir, r.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sctx.Err(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if _, start, err := procStat(pid); err != nil {
		r.e.cfg.Logger.WarnContext(ctx, "no start time of the CLI run", "engine", r.e.cfg.Name, "pid", pid, "error", err.Error())
	} else if err := o.writePID(pidRecord{PID: pid, Start: start, Op: op, Started: time.Now().UTC(), Tmp: r.tmp,
		Holder: holder, StartDigest: startDigest}); err != nil {
		r.e.cfg.Logger.WarnContext(ctx, "could not record the CLI run", "engine", r.e.cfg.Name, "pid", pid, "error", err.Error())
	}
	select {
	case err = <-done:
	case <-sctx.Done():
		// As terraform-exec does: SIGINT, on which the CLI stops starting new changes, waits
		// for those in flight and writes its state.
		_ = cmd.Process.Signal(os.Interrupt)
		grace := time.NewTimer(interruptGrace)
		defer grace.Stop()
		select {
		case err = <-done:
		case <-grace.C:
			if ctx.Err() == nil {
				// The step's timeout: the run is ended.
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				err = <-done
				break
			}
			// The operation was given up (its service stops, its lease is lost) and the CLI
			// is still finishing: it is left running, as if the service had died.
			r.detached = true
			revoke, tmp := r.revoke, r.tmp
			go func() {
				<-done
				revoke()
				_ = os.RemoveAll(tmp)
			}()
			r.e.cfg.Logger.WarnContext(ctx, "operation ended while the CLI still runs: left running", "engine", r.e.cfg.Name,
				"resource", r.key.String(), "op", op, "pid", pid, "interrupted", interruptGrace)
			return ctx.Err()
		}
	}
	// The record stays until the next operation: an errored.tfstate is judged with it.
	r.readDiagnostics(filepath.Join(r.dir, outputFile))
	return err
}

// readDiagnostics writes the diagnostics of a `-json` run's output file at path to r.out as
// text, as [planStream] does for a plan: the progress messages are dropped, so a failed step's
// message starts with the CLI's errors.
func (r *run) readDiagnostics(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s := newPlanStream(r.out)
	s.hideDetail = r.sensitive
	_, _ = io.Copy(s, f)
	s.flush()
	r.made = s.made
}
