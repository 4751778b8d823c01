//go:build !linux

package storetest

import "syscall"

// killWithParent: only Linux ties a process's life to its parent's; on
// other systems a PostgreSQL pass can outlive a test binary that is killed.
func killWithParent() *syscall.SysProcAttr { return nil }
