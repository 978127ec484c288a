package runner

import (
	"bufio"
	"context"
	"crypto/tls"
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
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lava-operator/lava/internal/platform/childproc"
	"github.com/lava-operator/lava/internal/platform/credentials"
)

// Config is what a runner process reads on its standard input when it starts: its key pair,
// the engine's certificate, and the directories and ports its sandbox allows.
type Config struct {
	// Own is the runner's key pair; Peer the engine's certificate, the only client accepted.
	Own  keyPair `json:"own"`
	Peer []byte  `json:"peer"`
	// Mirror is the provider mirror the runner starts executables from (read and execute).
	Mirror string `json:"mirror"`
	// Dir is the runner's private directory: each provider works in a directory under it.
	Dir string `json:"dir"`
	// WriteRoots are the other directories providers may write beneath (the policy's
	// fileWriteRoots).
	WriteRoots []string `json:"writeRoots,omitempty"`
	// ReadRoots are the system directories providers may read and execute from.
	ReadRoots []string `json:"readRoots,omitempty"`
	// DenyConnect are the TCP ports no provider may connect to (NATS, Lava's RPC).
	DenyConnect []uint16 `json:"denyConnect,omitempty"`
	// Unsandboxed skips the Landlock rules (tests of the protocol only).
	Unsandboxed bool `json:"unsandboxed,omitempty"`
}

// The go-plugin handshake every Terraform provider expects.
const (
	magicCookieKey   = "TF_PLUGIN_MAGIC_COOKIE"
	magicCookieValue = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
)

// startTimeout bounds a provider's start, as the engine's own pool does.
const startTimeout = time.Minute

// startRequest is the first line of a control connection: the executable (relative to the
// mirror) and the object's provider credentials.
type startRequest struct {
	Exe   string                `json:"exe"`
	Creds *credentials.Provider `json:"creds,omitempty"`
}

// reply answers a start request (Addr, Version) and each token refresh (Error only).
type reply struct {
	Addr    string `json:"addr,omitempty"`
	Version int    `json:"version,omitempty"`
	Pid     int    `json:"pid,omitempty"`
	Error   string `json:"error,omitempty"`
}

// refreshRequest is every later line of a control connection: the object's renewed token.
type refreshRequest struct {
	Token string `json:"token"`
}

// Main is `lava runner`: it reads its [Config] from in, listens on a loopback TCP port with
// mutual TLS, enters its sandbox, writes the port's address as one line to out and serves
// until ctx ends.
func Main(ctx context.Context, in io.Reader, out io.Writer) error {
	var cfg Config
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&cfg); err != nil {
		return fmt.Errorf("runner: config: %w", err)
	}
	tlsCfg, err := mutualTLS(cfg.Own, cfg.Peer, true)
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsCfg)
	if err != nil {
		return fmt.Errorf("runner: listen: %w", err)
	}
	defer ln.Close()
	if !cfg.Unsandboxed {
		if err := restrict(cfg); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		return err
	}
	s := &server{cfg: cfg, tls: tlsCfg}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("runner: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.control(ctx, c)
		}()
	}
}

type server struct {
	cfg Config
	tls *tls.Config
}

// control serves one control connection: it starts the provider asked for and keeps it
// running while the connection is open; the provider's exit closes the connection.
func (s *server) control(ctx context.Context, c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(io.LimitReader(c, 1<<24))
	enc := json.NewEncoder(c)
	var req startRequest
	line, err := r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err != nil {
		_ = enc.Encode(reply{Error: "bad request"})
		return
	}
	p, err := s.start(req)
	if err != nil {
		_ = enc.Encode(reply{Error: err.Error()})
		return
	}
	defer p.stop()
	pid := 0
	if rc := p.pc.ReattachConfig(); rc != nil {
		pid = rc.Pid
	}
	if err := enc.Encode(reply{Addr: p.ln.Addr().String(), Version: p.pc.NegotiatedVersion(), Pid: pid}); err != nil {
		return
	}
	go func() {
		for !p.pc.Exited() && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		_ = c.Close()
	}()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var rr refreshRequest
		if err := json.Unmarshal(line, &rr); err != nil {
			return
		}
		if req.Creds != nil {
			req.Creds.Token = rr.Token
		}
		msg := ""
		if _, err := req.Creds.Refresh(p.dir); err != nil {
			msg = err.Error()
		}
		if err := enc.Encode(reply{Error: msg}); err != nil {
			return
		}
	}
}

// hosted is one provider process the runner started and the TLS listener it is served on.
type hosted struct {
	pc  *plugin.Client
	ln  net.Listener
	dir string
}

func (p *hosted) stop() {
	_ = p.ln.Close()
	p.pc.Kill()
	_ = os.RemoveAll(p.dir)
}

// start launches the provider req.Exe of the mirror in a new private directory with the
// credentials' environment, and serves its plugin socket on a new mutual-TLS listener.
func (s *server) start(req startRequest) (*hosted, error) {
	exe := filepath.Join(s.cfg.Mirror, filepath.Clean("/"+req.Exe))
	if req.Exe == "" || !strings.HasPrefix(exe, filepath.Clean(s.cfg.Mirror)+string(filepath.Separator)) {
		return nil, errors.New("runner: executable outside the mirror")
	}
	dir, err := os.MkdirTemp(s.cfg.Dir, "provider-")
	if err != nil {
		return nil, fmt.Errorf("runner: working directory: %w", err)
	}
	env, err := req.Creds.Environ(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	env = append(env, "TMPDIR="+dir, "HOME="+dir, "PLUGIN_UNIX_SOCKET_DIR="+dir)
	if v, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+v)
	}
	cmd := exec.Command(exe)
	cmd.Dir, cmd.Env = dir, env
	childproc.DieWithParent(cmd)
	// The provider serves on a Unix socket in its directory, which every process of the runner
	// user can connect to (every namespace's runner is that user; Landlock does not cover
	// connecting to a socket): with AutoMTLS only the holder of the certificate made here,
	// this runner, is served.
	pcfg := &plugin.ClientConfig{
		HandshakeConfig:  plugin.HandshakeConfig{MagicCookieKey: magicCookieKey, MagicCookieValue: magicCookieValue},
		VersionedPlugins: map[int]plugin.PluginSet{5: {"provider": stub{}}, 6: {"provider": stub{}}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AutoMTLS:         true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     startTimeout,
		Logger:           hclog.NewNullLogger(),
		Stderr:           io.Discard,
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
	}
	pc := plugin.NewClient(pcfg)
	addr, err := pc.Start()
	if err == nil && (pcfg.TLSConfig == nil || pcfg.TLSConfig.RootCAs == nil) {
		err = errors.New("it serves without TLS (no certificate in its handshake), so any process of the runner's user could call it")
	}
	if err != nil {
		pc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runner: start provider %s: %w", req.Exe, err)
	}
	toProvider := pcfg.TLSConfig.Clone()
	toProvider.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.tls)
	if err != nil {
		pc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("runner: listen: %w", err)
	}
	go proxy(ln, addr, toProvider)
	return &hosted{pc: pc, ln: ln, dir: dir}, nil
}

// proxy copies every connection accepted on ln to and from the provider's socket at to, over
// the provider's mutual TLS (tlsTo).
func proxy(ln net.Listener, to net.Addr, tlsTo *tls.Config) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			raw, err := net.Dial(to.Network(), to.String())
			if err != nil {
				return
			}
			p := tls.Client(raw, tlsTo)
			defer p.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(p, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, p); done <- struct{}{} }()
			<-done
		}()
	}
}

// stub is the go-plugin glue of a provider the runner only starts and never calls itself
// (go-plugin's shutdown aside).
type stub struct{ plugin.NetRPCUnsupportedPlugin }

func (stub) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("runner: serves no plugin")
}

func (stub) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return struct{}{}, nil
}
