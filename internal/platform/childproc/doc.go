// Package childproc ties the processes Lava starts (provider plugins, OpenTofu and Terraform)
// to the process that started them, so none outlives it.
//
// A service that is SIGKILLed (an OOM kill, a node drain past its grace period, a chaos test)
// runs no deferred cleanup. Without a tie, its provider processes and a tofu apply in flight
// keep running, orphaned: they hold memory and credentials and may go on changing
// infrastructure that the next holder of the object is about to plan again. [DieWithParent]
// asks the kernel to SIGKILL the child when its parent dies (Linux's PR_SET_PDEATHSIG, set
// through [syscall.SysProcAttr.Pdeathsig]); elsewhere it does nothing.
package childproc
