//go:build !linux

package locals3

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; a server whose
// parent dies without Close keeps running until killed.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
