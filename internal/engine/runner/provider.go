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
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/lava-operator/lava/internal/platform/credentials"
)

// Provider is a provider process started in a runner, for go-plugin to reattach to: its
// address and protocol version ([Provider.Reattach]) and the TLS configuration that reaches
// it ([Provider.TLS]). It lives while its control connection is open.
type Provider struct {
	version int
	pid     int
	addr    net.Addr
	tls     *tls.Config

	conn    net.Conn
	replies chan reply
	done    chan struct{}
	mu      sync.Mutex
}

// Start starts the provider executable exe (a path in the host's mirror) in the runner of
// (namespace, creds' identity), with creds (nil: none) written in its private directory.
func (h *Host) Start(ctx context.Context, namespace, exe string, creds *credentials.Provider) (*Provider, error) {
	rel, err := filepath.Rel(h.opts.Mirror, exe)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("runner: %s is not in the provider mirror %s: providers installed from a registry are not run in runners yet", exe, h.opts.Mirror)
	}
	c, err := h.runner(hostKey(namespace, creds))
	if err != nil {
		return nil, err
	}
	conn, err := c.dial(ctx, c.addr)
	if err != nil {
		return nil, fmt.Errorf("runner: dial: %w", err)
	}
	// The runner answers within its provider start timeout (a minute), or ctx ends first.
	deadline := time.Now().Add(startTimeout + 30*time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	p, err := startOn(conn, startRequest{Exe: rel, Creds: creds})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	p.tls = c.tls
	return p, nil
}

// startOn sends the start request on the control connection and reads the reply.
func startOn(conn net.Conn, req startRequest) (*Provider, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := bufio.NewReader(io.LimitReader(conn, 1<<20))
	var rep reply
	line, err := r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &rep)
	}
	if err != nil {
		return nil, fmt.Errorf("runner: start: %w", err)
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	addr, err := net.ResolveTCPAddr("tcp", rep.Addr)
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	p := &Provider{version: rep.Version, pid: rep.Pid, addr: addr, conn: conn, replies: make(chan reply), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var rep reply
			if json.Unmarshal(line, &rep) != nil {
				return
			}
			p.replies <- rep
		}
	}()
	return p, nil
}

// Reattach is the go-plugin configuration reaching the provider (set the client's TLSConfig
// to [Provider.TLS]); killing the client ends the provider. Its Pid is the provider's process
// id as the runner sees it (the host's too, on one machine), for logs and tests only.
func (p *Provider) Reattach() *plugin.ReattachConfig {
	return &plugin.ReattachConfig{Protocol: plugin.ProtocolGRPC, ProtocolVersion: p.version, Addr: p.addr, Pid: p.pid,
		ReattachFunc: func() (runner.AttachedRunner, error) { return attached{p}, nil }}
}

// Version is the plugin protocol version the provider speaks (5 or 6).
func (p *Provider) Version() int { return p.version }

// TLS is the engine's side of the mutual TLS to the runner.
func (p *Provider) TLS() *tls.Config { return p.tls.Clone() }

// Refresh writes creds' token into the provider's token file.
func (p *Provider) Refresh(creds *credentials.Provider) error {
	if creds.Empty() || creds.Token == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := json.Marshal(refreshRequest{Token: creds.Token})
	if err != nil {
		return err
	}
	if _, err := p.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("runner: refresh: %w", err)
	}
	select {
	case rep := <-p.replies:
		if rep.Error != "" {
			return errors.New(rep.Error)
		}
		return nil
	case <-p.done:
		return errors.New("runner: refresh: the provider exited")
	}
}

// attached is go-plugin's handle on the provider: it ends with the control connection.
type attached struct{ p *Provider }

func (a attached) Wait(ctx context.Context) error {
	select {
	case <-a.p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a attached) Kill(ctx context.Context) error {
	_ = a.p.conn.Close()
	return a.Wait(ctx)
}

func (a attached) ID() string { return "runner:" + a.p.addr.String() }

func (attached) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (attached) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }
