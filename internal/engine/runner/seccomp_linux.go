package runner

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// auditArch is the seccomp architecture of this build's system calls (AUDIT_ARCH_*).
var auditArch = map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7}

// ipprotoMPTCP is IPPROTO_MPTCP.
const ipprotoMPTCP = 262

// classic BPF opcodes of a seccomp filter.
const (
	bpfLoadAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJge     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRet     = unix.BPF_RET | unix.BPF_K
)

// refuseMPTCP installs, on every thread of the runner and so on every process it starts, a
// seccomp filter refusing Multipath TCP sockets (socket(2) with IPPROTO_MPTCP fails with
// EPROTONOSUPPORT, as on a kernel without MPTCP: Go and others fall back to TCP), which
// Landlock's TCP rules do not cover, and every system call of another architecture or ABI
// (32-bit x86, x32), through which the filter could be gone around.
func refuseMPTCP() error {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("runner: seccomp: no filter for %s", runtime.GOARCH)
	}
	const (
		offNr   = 0
		offArch = 4
		offArg2 = 16 + 2*8 // args[2], low 32 bits (little endian)
		allow   = unix.SECCOMP_RET_ALLOW
		enosys  = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		noProto = unix.SECCOMP_RET_ERRNO | uint32(unix.EPROTONOSUPPORT)
	)
	prog := []unix.SockFilter{
		{Code: bpfLoadAbs, K: offArch},
		{Code: bpfJeq, K: arch, Jt: 1},
		{Code: bpfRet, K: enosys},
		{Code: bpfLoadAbs, K: offNr},
		{Code: bpfJge, K: 0x40000000, Jf: 1},
		{Code: bpfRet, K: enosys},
		{Code: bpfJeq, K: unix.SYS_SOCKET, Jf: 3},
		{Code: bpfLoadAbs, K: offArg2},
		{Code: bpfJeq, K: ipprotoMPTCP, Jf: 1},
		{Code: bpfRet, K: noProto},
		{Code: bpfRet, K: allow},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("runner: no_new_privs: %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("runner: seccomp: %w", errno)
	}
	return nil
}
