package agent

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// listenInNetns opens a TCP listener on addr inside the network namespace
// of process pid (a container's init): the workload reaches it at
// 127.0.0.1 of its own namespace, and nothing else can. A socket stays in
// the namespace it was created in, so the agent serves it from its own.
//
// setns changes the namespace of one OS thread only; the goroutine keeps
// its thread locked and ends without unlocking it, so Go discards the
// thread instead of running other goroutines in the container's namespace.
func listenInNetns(pid int, addr string) (net.Listener, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter the network namespace of %d: %w", pid, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}
