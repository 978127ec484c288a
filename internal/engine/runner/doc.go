// Package runner runs tenant providers outside the engine: a runner process (`lava runner`,
// [Main]) starts provider plugins as the engine would and serves each one's plugin socket to
// the engine over mutual TLS on a loopback TCP port; the engine reattaches to it with
// go-plugin ([Provider.Reattach], [Provider.TLS]) and calls it as it calls a provider it
// started itself. docs/design/0038-provider-runner.md.
//
// # Runner
//
// [Main] reads its [Config] on standard input: its certificate and key and the engine's
// certificate (made for this runner by its parent, [Host]), the provider mirror, its private
// directory, the write roots and the TCP ports it may not connect to. It listens, enters its
// sandbox (Landlock: read and execute beneath the mirror and the system directories, write
// beneath its directory and the write roots, connect(2) to every TCP port but the denied ones,
// no signals outside; [Support] says what the kernel lacks), writes its address on standard
// output and serves. Each connection is a control connection: one start request (the
// executable, relative to the mirror, and the object's provider credentials), answered with
// the address of a new mutual-TLS listener that forwards to the provider's socket and the
// protocol version it speaks; later lines renew the credentials' token. The provider lives
// while the connection does; its exit closes the connection.
//
// # Host
//
// [Host] is the engine's side (embedded.Options.ProviderHost): it keeps one runner process
// per (namespace, identity), started on first use under the runner user (uid and gid) from a
// descriptor of the host's own executable, in a private directory below a host directory that
// also holds a view of the provider mirror the runner user can read and not write (copies: a
// hard link would change the original's ctime, by which the engines pin the mirror). [Host.Start] starts a provider in the right runner.
//
// The host directory (lava-runners-* in the system's temporary directory) holds a lock file
// the host flocks while it lives. [Host.Close] removes the directory; when the process was
// killed first (SIGKILL, the OOM killer), the kernel releases the lock, and the next host of
// the same user removes the directory at its start ([ReclaimStale]).
package runner
