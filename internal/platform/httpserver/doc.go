// Package httpserver runs every HTTP listener Lava opens (the RPCs of synth and attest, the
// metrics and health listeners, the engines' loopback state backend) with the same bounds:
// the connections held open in total (golang.org/x/net/netutil.LimitListener) and per remote
// IP address, the time to read a header, a request and to write a response, the idle time of
// a keep-alive connection, the header size, and HTTP/2 streams and receive buffers.
//
// [Limits] holds the bounds (a zero field is its Default* constant, declared once here), and
// [Limits.Register] makes them flags of a service that has flags for that server (synth's and
// attest's --rpc-*). [Serve] serves a handler with them until its context ends; [Run] is the
// graceful serve-and-shutdown of an http.Server built otherwise ([Limits.Server] plus
// protocol settings). [Counter] bounds what each client or identity holds at once, here and in
// internal/platform/rpcauth.
package httpserver
