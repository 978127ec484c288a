package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/lava-operator/lava/internal/engine/runner"
	"github.com/lava-operator/lava/internal/platform/childproc"
	"github.com/lava-operator/lava/internal/platform/credentials"

	"github.com/lava-operator/lava/internal/engine/embedded/tfplugin5"
	"github.com/lava-operator/lava/internal/engine/embedded/tfplugin6"
)

// The go-plugin handshake every Terraform provider expects.
const (
	magicCookieKey   = "TF_PLUGIN_MAGIC_COOKIE"
	magicCookieValue = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
	pluginName       = "provider"
)

// providerPlugin is the go-plugin glue for one protocol version; Lava is only ever a client.
type providerPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	version int
}

func (p providerPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("embedded: lava does not serve providers")
}

func (p providerPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	if p.version == 5 {
		return &client5{rpc: tfplugin5.NewProviderClient(conn)}, nil
	}
	return &client6{rpc: tfplugin6.NewProviderClient(conn)}, nil
}

// process is a running provider plugin.
type process struct {
	Client
	pc *plugin.Client
	// dir is the process's private working directory, removed when it is killed.
	dir string
	// hosted is the provider when a [ProviderHost] runs it (dir is then "": the runner's).
	hosted *runner.Provider
}

// ProviderHost starts provider processes outside the engine's process: [runner.Host], which
// runs them in runner processes under their own user and sandbox.
type ProviderHost interface {
	// Start starts the provider executable exe (found in the engine's mirror) for an object
	// of namespace with creds (nil: none).
	Start(ctx context.Context, namespace, exe string, creds *credentials.Provider) (*runner.Provider, error)
}

// startHosted starts the provider executable in host and reattaches to it over the runner's
// mutual TLS: the same plugin client as [startProvider]'s, the process elsewhere.
func startHosted(ctx context.Context, host ProviderHost, namespace, exe string, creds *credentials.Provider) (*process, error) {
	hp, err := host.Start(ctx, namespace, exe, creds)
	if err != nil {
		return nil, fmt.Errorf("start provider %s: %w", exe, err)
	}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  plugin.HandshakeConfig{MagicCookieKey: magicCookieKey, MagicCookieValue: magicCookieValue},
		Plugins:          plugin.PluginSet{pluginName: providerPlugin{version: hp.Version()}},
		Reattach:         hp.Reattach(),
		TLSConfig:        hp.TLS(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
	})
	return dispense(pc, exe, "", hp)
}

// dispense returns the provider client of the started pc; on failure it kills pc and
// removes dir.
func dispense(pc *plugin.Client, exe, dir string, hosted *runner.Provider) (*process, error) {
	rpc, err := pc.Client()
	if err != nil {
		pc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start provider %s: %w", exe, err)
	}
	raw, err := rpc.Dispense(pluginName)
	if err != nil {
		pc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start provider %s: dispense: %w", exe, err)
	}
	c, ok := raw.(Client)
	if !ok {
		pc.Kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start provider %s: unexpected plugin client %T", exe, raw)
	}
	return &process{Client: c, pc: pc, dir: dir, hosted: hosted}, nil
}

// refresh rewrites the process's token file with creds' token.
func (p *process) refresh(creds *credentials.Provider) error {
	if p.hosted != nil {
		return p.hosted.Refresh(creds)
	}
	_, err := creds.Refresh(p.dir)
	return err
}

// providerEnv is the whole environment a provider starts with, before go-plugin adds the
// plugin protocol's variables (magic cookie, protocol versions, mTLS certificate): the object's
// provider credentials (creds, written into dir: [credentials.Provider.Environ]), PATH
// and a private TMPDIR and HOME, nothing of the applier's own (its credentials, tokens, the
// tofu backend password; docs/security.md, "Engines").
func providerEnv(dir string, creds *credentials.Provider) ([]string, error) {
	env, err := creds.Environ(dir)
	if err != nil {
		return nil, err
	}
	env = append(env, "TMPDIR="+dir, "HOME="+dir)
	if p, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+p)
	}
	return env, nil
}

// startProvider launches the provider executable with creds (nil: none) in a private working
// directory (mode 0700) and negotiates protocol 6 or 5. Its log output is discarded: providers
// may log attribute values, which can be secrets.
func startProvider(exe string, startTimeout time.Duration, creds *credentials.Provider) (*process, error) {
	dir, err := os.MkdirTemp("", "lava-provider-")
	if err != nil {
		return nil, fmt.Errorf("start provider %s: working directory: %w", exe, err)
	}
	env, err := providerEnv(dir, creds)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start provider %s: %w", exe, err)
	}
	cmd := exec.Command(exe)
	cmd.Dir, cmd.Env = dir, env
	// A SIGKILLed service runs no Kill: the kernel ends the provider with it.
	childproc.DieWithParent(cmd)
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{MagicCookieKey: magicCookieKey, MagicCookieValue: magicCookieValue},
		VersionedPlugins: map[int]plugin.PluginSet{
			5: {pluginName: providerPlugin{version: 5}},
			6: {pluginName: providerPlugin{version: 6}},
		},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Managed:          false,
		StartTimeout:     startTimeout,
		Logger:           hclog.NewNullLogger(),
		Stderr:           io.Discard,
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
	})
	return dispense(pc, exe, dir, nil)
}

// exited reports whether the provider process has ended (crashed or killed).
func (p *process) exited() bool { return p.pc.Exited() }

// kill shuts the provider down gracefully, forcefully after go-plugin's grace period.
func (p *process) kill() {
	p.pc.Kill()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}
