package storetest

import "syscall"

// killWithParent has the kernel kill the PostgreSQL pass when this process
// dies.
func killWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
