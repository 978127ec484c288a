package keystonetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PostgresBinDir is where Debian's postgresql-15 package installs initdb, postgres and createdb.
const PostgresBinDir = "/usr/lib/postgresql/15/bin"

// InstallCommand installs everything [Start] runs (Debian bookworm).
const InstallCommand = "DEBIAN_FRONTEND=noninteractive apt-get install -y keystone python3-psycopg2 postgresql-15"

// Keystone is a running Keystone with a bootstrapped admin: user Username with Password, the
// admin role on project ProjectName, both in the domain DomainName.
type Keystone struct {
	// AuthURL is the identity endpoint, "http://127.0.0.1:PORT/v3".
	AuthURL string
	// Region is the region of the catalog's identity endpoints.
	Region string
	// Username, Password, ProjectName and DomainName are the admin's credentials.
	Username, Password, ProjectName, DomainName string

	mu    sync.Mutex
	token string
}

// Env returns the admin's credentials as the OpenStack SDKs read them from the environment
// ("NAME=value"; OS_PASSWORD is a secret: never log it).
func (k *Keystone) Env() map[string]string {
	return map[string]string{
		"OS_AUTH_URL":             k.AuthURL,
		"OS_USERNAME":             k.Username,
		"OS_PASSWORD":             k.Password,
		"OS_PROJECT_NAME":         k.ProjectName,
		"OS_USER_DOMAIN_NAME":     k.DomainName,
		"OS_PROJECT_DOMAIN_NAME":  k.DomainName,
		"OS_REGION_NAME":          k.Region,
		"OS_IDENTITY_API_VERSION": "3",
	}
}

// Start starts PostgreSQL (as the postgres user when the test runs as root: PostgreSQL refuses
// root) and Keystone on free loopback ports, creates Keystone's database, keys and admin, and
// returns the running service. Everything stops, and its files are removed, at t's cleanup. A
// missing binary fails t with [InstallCommand]; a failing step fails t with the step's output.
func Start(t testing.TB) *Keystone {
	t.Helper()
	start := time.Now()
	for _, b := range []string{"initdb", "postgres", "createdb"} {
		if _, err := os.Stat(filepath.Join(PostgresBinDir, b)); err != nil {
			t.Fatalf("PostgreSQL 15 is not installed (%v): run `%s`", err, InstallCommand)
		}
	}
	for _, b := range []string{"keystone-manage", "keystone-wsgi-public"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("Keystone is not installed (%v): run `%s`", err, InstallCommand)
		}
	}
	base, err := os.MkdirTemp("", "keystonetest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	pgPort := startPostgres(t, base)
	k := &Keystone{Region: "RegionOne", Username: "admin", Password: randomHex(t), ProjectName: "admin", DomainName: "Default"}
	startKeystone(t, base, pgPort, k)
	t.Logf("keystonetest: Keystone on PostgreSQL up at %s in %s", k.AuthURL, time.Since(start).Round(100*time.Millisecond))
	return k
}

// startPostgres initializes a cluster under base/pg and runs postgres on a free loopback port
// (no Unix socket outside base, trust authentication, no fsync) until cleanup; it returns the
// port once the database "keystone" exists.
func startPostgres(t testing.TB, base string) int {
	t.Helper()
	data := filepath.Join(base, "pg")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs the postgres user (%v): run `%s`", err, InstallCommand)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		if err := os.Chown(data, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "initdb", cred, filepath.Join(PostgresBinDir, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync")
	// A port taken between freePort and postgres's bind makes postgres exit: try another.
	var lastErr error
	for attempt := range 3 {
		port := freePort(t)
		cmd := exec.Command(filepath.Join(PostgresBinDir, "postgres"), "-D", data, "-k", data,
			"-h", "127.0.0.1", "-p", strconv.Itoa(port),
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
		logf := filepath.Join(base, fmt.Sprintf("postgres-%d.log", attempt))
		done := startDaemon(t, cmd, cred, logf, syscall.SIGINT)
		if lastErr = createDatabase(port, done, logf); lastErr == nil {
			return port
		}
	}
	t.Fatalf("postgres did not start: %v", lastErr)
	return 0
}

// createDatabase creates the database "keystone" on the postgres at port once it accepts
// connections (within 30s), unless done closes first (postgres exited).
func createDatabase(port int, done <-chan struct{}, logf string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("postgres exited:\n%s", tail(logf))
		default:
		}
		c := exec.Command(filepath.Join(PostgresBinDir, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "keystone")
		out, err := c.CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("createdb on port %d: %v: %s\npostgres log:\n%s", port, err, out, tail(logf))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startKeystone writes a configuration for the database on pgPort, creates the schema, the
// fernet and credential keys and the admin (k's credentials), then runs keystone-wsgi-public on
// a free loopback port until cleanup and fills k.AuthURL once it answers.
func startKeystone(t testing.TB, base string, pgPort int, k *Keystone) {
	t.Helper()
	dir := filepath.Join(base, "keystone")
	for _, d := range []string{dir, filepath.Join(dir, "fernet"), filepath.Join(dir, "credential")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "keystone.conf")
	body := fmt.Sprintf(`[DEFAULT]
use_stderr = true
[database]
connection = postgresql://postgres@127.0.0.1:%d/keystone
[fernet_tokens]
key_repository = %s
[fernet_receipts]
key_repository = %s
[credential]
key_repository = %s
`, pgPort, filepath.Join(dir, "fernet"), filepath.Join(dir, "fernet"), filepath.Join(dir, "credential"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	g, err := user.LookupGroupId(me.Gid)
	if err != nil {
		t.Fatal(err)
	}
	owner := []string{"--keystone-user", me.Username, "--keystone-group", g.Name}
	// The schema and the two key repositories are independent: made at once.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, args := range [][]string{{"db_sync"}, append([]string{"fernet_setup"}, owner...), append([]string{"credential_setup"}, owner...)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("keystone-manage", append([]string{"--config-file", conf}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("keystone-manage %s: %v\n%s", args[0], err, lastLines(string(out), 30))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	k.AuthURL = fmt.Sprintf("http://127.0.0.1:%d/v3", port)
	// The password reaches keystone-manage through its environment, not its command line.
	cmd := exec.Command("keystone-manage", "--config-file", conf, "bootstrap",
		"--bootstrap-username", k.Username, "--bootstrap-project-name", k.ProjectName,
		"--bootstrap-admin-url", k.AuthURL, "--bootstrap-public-url", k.AuthURL,
		"--bootstrap-internal-url", k.AuthURL, "--bootstrap-region-id", k.Region)
	cmd.Env = append(os.Environ(), "OS_BOOTSTRAP_PASSWORD="+k.Password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("keystone-manage bootstrap: %v\n%s", err, lastLines(string(out), 30))
	}
	logf := filepath.Join(base, "keystone.log")
	ks := exec.Command("keystone-wsgi-public", "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	ks.Env = append(os.Environ(), "OS_KEYSTONE_CONFIG_FILES="+conf)
	done := startDaemon(t, ks, nil, logf, syscall.SIGTERM)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("keystone-wsgi-public exited:\n%s", tail(logf))
		default:
		}
		if resp, err := http.Get(k.AuthURL); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("keystone at %s not ready within 60s:\n%s", k.AuthURL, tail(logf))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Token returns a project-scoped admin token (one per Keystone, issued on first use).
func (k *Keystone) Token(t testing.TB) string {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.token != "" {
		return k.token
	}
	domain := map[string]any{"name": k.DomainName}
	body := map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": k.Username, "domain": domain, "password": k.Password}}},
		"scope": map[string]any{"project": map[string]any{"name": k.ProjectName, "domain": domain}},
	}}
	b, _ := json.Marshal(body)
	resp, err := http.Post(k.AuthURL+"/auth/tokens", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("keystone token: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusCreated {
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("keystone token: %s: %s", resp.Status, out)
	}
	k.token = resp.Header.Get("X-Subject-Token")
	return k.token
}

// Do sends an identity API request with the admin token (path is relative to AuthURL, e.g.
// "/projects/ID"; body, when not nil, is sent as JSON) and returns the status code and the
// response body. A failed request fails t.
func (k *Keystone) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, k.AuthURL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", k.Token(t))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("keystone %s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("keystone %s %s: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// startDaemon starts cmd (as cred when not nil) with its output in logf, tied to the test
// process (it gets SIGKILL if the test process dies), and stops it at cleanup with stop, then
// SIGKILL after 15s. The returned channel closes when the process exits.
func startDaemon(t testing.TB, cmd *exec.Cmd, cred *syscall.Credential, logf string, stop syscall.Signal) <-chan struct{} {
	t.Helper()
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return done
}

// run runs a command to completion (as cred when not nil), failing t with its output.
func run(t testing.TB, what string, cred *syscall.Credential, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, lastLines(string(out), 30))
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

func randomHex(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tail returns the last lines of the file at path.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), 30)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
