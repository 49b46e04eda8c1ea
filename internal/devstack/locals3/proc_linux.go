package locals3

import "syscall"

// sysProcAttr makes the kernel kill the server when the process that started
// it dies, however it dies (a go test timeout, SIGKILL), so no server
// outlives its test binary. Setpgid keeps a Ctrl-C in the terminal, sent to
// the foreground process group, from reaching the server before the dev
// stack has shut down in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
