package runner

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lava-operator/lava/internal/platform/childproc"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// ErrClosed is returned by [Host.Start] after [Host.Close].
var ErrClosed = errors.New("runner: host closed")

// Options configure a [Host].
type Options struct {
	// Exe is the program a runner runs (lava), Args its arguments ("runner") and Env
	// variables added to its PATH.
	Exe  string
	Args []string
	Env  []string
	// Mirror is the engine's provider mirror: the host gives runners a view of it they can
	// read (copies, made once in [NewHost]) that they cannot write.
	Mirror string
	// UID and GID are the user and group runners run as; UID < 0 keeps the host's own.
	UID, GID int
	// WriteRoots, ReadRoots and DenyConnect go to each runner's [Config].
	WriteRoots  []string
	ReadRoots   []string
	DenyConnect []uint16
	// NamespaceRoot, when set, is a directory holding one directory per namespace (lava up's
	// built-in policy's file root): a runner of namespace NS may write beneath
	// NamespaceRoot/NS only, not beneath the others' (every runner is the same user, so only
	// its Landlock rules keep it out of them). The host makes that directory (mode 0700,
	// owned by UID and GID) when it is missing.
	NamespaceRoot string
	// Protect are directories no runner may read: [NewHost] refuses read or write roots
	// holding one of them (lava up's state directory).
	Protect []string
	// Stderr receives the runners' own error output (nil: discarded).
	Stderr io.Writer
}

// Host keeps one runner process per (namespace, identity) and starts providers in them.
// Safe for concurrent use.
type Host struct {
	opts Options
	// root holds the mirror view and each runner's private directory; lock is its
	// [hostLockFile], flocked while the host lives.
	root string
	lock *os.File

	mu      sync.Mutex
	closed  bool
	runners map[string]*child
	// spawns counts runner processes started, for tests.
	spawns int
}

// child is one runner process and how to reach it.
type child struct {
	ready  chan struct{}
	err    error
	cmd    *exec.Cmd
	addr   string
	tls    *tls.Config
	exited chan struct{}
}

// NewHost checks the options and prepares the runners' directories.
func NewHost(opts Options) (*Host, error) {
	roots := append(append([]string{opts.Mirror}, opts.WriteRoots...), opts.ReadRoots...)
	if opts.NamespaceRoot != "" {
		roots = append(roots, opts.NamespaceRoot)
	}
	if opts.ReadRoots == nil {
		roots = append(roots, DefaultReadRoots...)
	}
	for _, p := range opts.Protect {
		for _, r := range roots {
			if within(p, r) {
				return nil, fmt.Errorf("runner: %s is beneath %s, which runners may read", p, r)
			}
		}
	}
	if n := ReclaimStale(os.TempDir(), time.Now()); n > 0 && opts.Stderr != nil {
		fmt.Fprintf(opts.Stderr, "runner: removed %d directories of runner hosts that are gone from %s\n", n, os.TempDir())
	}
	root, err := os.MkdirTemp("", rootPrefix)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	lock, err := lockRoot(root)
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	h := &Host{opts: opts, root: root, lock: lock, runners: map[string]*child{}}
	if err := os.Chmod(root, 0o711); err != nil {
		_ = h.removeRoot()
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := stageMirror(opts.Mirror, h.mirror()); err != nil {
		_ = h.removeRoot()
		return nil, err
	}
	return h, nil
}

// rootPrefix begins the name of every host's directory in the system's temporary directory.
const rootPrefix = "lava-runners-"

// hostLockFile, in a host's directory, is flocked (flock(2), exclusive) for the host's
// lifetime; the kernel releases it when the process ends, however it ends.
const hostLockFile = ".host.lock"

// staleUnlockedAge is how old a host directory without a lock file must be to count as
// stale: a host makes its directory and then its lock file, and a directory just made has none
// yet.
const staleUnlockedAge = 10 * time.Minute

// lockRoot creates root's [hostLockFile] already flocked: locked under another name and then
// renamed, so no [ReclaimStale] finds it unlocked.
func lockRoot(root string) (*os.File, error) {
	tmp := filepath.Join(root, hostLockFile+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("runner: lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(root, hostLockFile)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("runner: %w", err)
	}
	return f, nil
}

// ReclaimStale removes the directories hosts of this user left in dir (the system's
// temporary directory) when their process was killed before [Host.Close] (SIGKILL, the OOM
// killer): every directory named lava-runners-* that this user owns whose lock file no
// process holds, or that has none and is older than 10 minutes. Each holds a copy of the
// provider mirror. A directory in use, another user's, or a symbolic link is left alone. It
// returns how many it removed; what it cannot read or remove stays for the next host.
func ReclaimStale(dir string, now time.Time) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), rootPrefix) || e.Type()&os.ModeType != os.ModeDir {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		st, ok := fi.Sys().(*syscall.Stat_t)
		if err != nil || !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if stale(p, fi, now) && os.RemoveAll(p) == nil {
			removed++
		}
	}
	return removed
}

// stale reports whether the host directory p (fi) belongs to no living host.
func stale(p string, fi os.FileInfo, now time.Time) bool {
	f, err := os.OpenFile(filepath.Join(p, hostLockFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return now.Sub(fi.ModTime()) > staleUnlockedAge
	}
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // held: its host is alive
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// removeRoot removes the host's directory, then releases its lock.
func (h *Host) removeRoot() error {
	err := os.RemoveAll(h.root)
	_ = h.lock.Close()
	return err
}

// within reports whether p is r or beneath it.
func within(p, r string) bool {
	p, r = filepath.Clean(p), filepath.Clean(r)
	return p == r || strings.HasPrefix(p, r+string(filepath.Separator)) || r == "/"
}

func (h *Host) mirror() string { return filepath.Join(h.root, "mirror") }

// stageMirror makes dst a tree of the files of the mirror src (symbolic links followed),
// directories mode 0755, each file a copy. Never a hard link: a link changes the original's
// ctime, and the engines pin the mirror's packages by it, so every other engine on the same
// mirror would refuse its providers as replaced.
func stageMirror(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		fi, err := os.Stat(real)
		if err != nil || fi.IsDir() {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return copyFile(real, out, fi.Mode().Perm())
	})
	if err != nil {
		return fmt.Errorf("runner: stage the provider mirror: %w", err)
	}
	return os.Chmod(dst, 0o755)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// runner returns the running runner of key, starting one when there is none (or it exited).
func (h *Host) runner(key string) (*child, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	c, ok := h.runners[key]
	if ok {
		select {
		case <-c.exited:
			ok = false
		default:
		}
	}
	if !ok {
		c = &child{ready: make(chan struct{}), exited: make(chan struct{})}
		h.runners[key] = c
		h.spawns++
		h.mu.Unlock()
		c.err = h.spawn(c, key)
		close(c.ready)
		if c.err != nil {
			h.mu.Lock()
			if h.runners[key] == c {
				delete(h.runners, key)
			}
			h.mu.Unlock()
		}
		return c, c.err
	}
	h.mu.Unlock()
	<-c.ready
	return c, c.err
}

// spawn starts the runner process of key, under the runner user, in its private directory.
func (h *Host) spawn(c *child, key string) error {
	sum := sha256.Sum256([]byte(key))
	dir := filepath.Join(h.root, hex.EncodeToString(sum[:8]))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("runner: %w", err)
	}
	cfg, engine, err := h.config(dir)
	if err != nil {
		return err
	}
	if h.opts.NamespaceRoot != "" {
		ns, _, _ := strings.Cut(key, "\x00")
		root, err := h.namespaceRoot(ns)
		if err != nil {
			return err
		}
		cfg.WriteRoots = append(cfg.WriteRoots, root)
	}
	// The runner's user may not be able to reach the host's executable (under /root, say):
	// it is executed through a descriptor the host opened.
	exe, err := os.Open(h.opts.Exe)
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	defer exe.Close()
	cmd := exec.Command("/proc/self/fd/3", h.opts.Args...)
	cmd.ExtraFiles = []*os.File{exe}
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, h.opts.Env...)
	cmd.Stderr = h.opts.Stderr
	childproc.DieWithParent(cmd)
	if h.opts.UID >= 0 {
		if err := os.Chown(dir, h.opts.UID, h.opts.GID); err != nil {
			return fmt.Errorf("runner: %w", err)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(h.opts.UID), Gid: uint32(h.opts.GID), Groups: []uint32{}}
	}
	in, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(string(in))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("runner: start: %w", err)
	}
	c.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	line, err := bufio.NewReader(io.LimitReader(stdout, 256)).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("runner: the runner did not start: %w", err)
	}
	c.addr = strings.TrimSpace(line)
	c.tls, err = mutualTLS(engine, cfg.Own.Cert, false)
	return err
}

// namespaceRoot is the directory a runner of namespace ns writes beneath: ns's directory
// below Options.NamespaceRoot, made (mode 0700, the runner user's) when missing; a symbolic
// link or a name that is not one path element is refused.
func (h *Host) namespaceRoot(ns string) (string, error) {
	if ns == "" || ns == "." || ns == ".." || strings.ContainsAny(ns, "/\x00") {
		return "", fmt.Errorf("runner: namespace %q names no directory below %s", ns, h.opts.NamespaceRoot)
	}
	dir := filepath.Join(h.opts.NamespaceRoot, ns)
	if err := os.Mkdir(dir, 0o700); err == nil {
		if h.opts.UID >= 0 {
			if err := os.Chown(dir, h.opts.UID, h.opts.GID); err != nil {
				return "", fmt.Errorf("runner: %w", err)
			}
		}
	} else if !os.IsExist(err) {
		return "", fmt.Errorf("runner: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("runner: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("runner: %s is not a directory", dir)
	}
	return dir, nil
}

// config is a new runner's configuration in dir, with new key pairs, and the engine's pair.
func (h *Host) config(dir string) (Config, keyPair, error) {
	own, err := newKeyPair(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return Config{}, keyPair{}, err
	}
	engine, err := newKeyPair(x509.ExtKeyUsageClientAuth)
	if err != nil {
		return Config{}, keyPair{}, err
	}
	return Config{Own: own, Peer: engine.Cert, Mirror: h.mirror(), Dir: dir, WriteRoots: h.opts.WriteRoots,
		ReadRoots: h.opts.ReadRoots, DenyConnect: h.opts.DenyConnect}, engine, nil
}

// Close stops every runner (and so every provider in them) and removes their directories.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	rs := h.runners
	h.runners = map[string]*child{}
	h.mu.Unlock()
	for _, c := range rs {
		<-c.ready
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	return h.removeRoot()
}

// dial opens a mutual-TLS connection to the runner.
func (c *child) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := tls.Dialer{Config: c.tls, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
	return d.DialContext(ctx, "tcp", addr)
}

// hostKey is the runner a namespace's identity uses.
func hostKey(namespace string, creds *credentials.Provider) string {
	id := ""
	if creds != nil {
		id = creds.Identity
	}
	return namespace + "\x00" + id
}
