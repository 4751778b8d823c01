package agent

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// listenInNetns opens a TCP listener on addr inside the network namespace
// of process pid (a container's init): the workload reaches it at
// 127.0.0.1 of its own namespace, and nothing else can. A socket stays in
// the namespace it was created in, so the agent serves it from its own.
func listenInNetns(pid int, addr string) (net.Listener, error) {
	return inNetns(pid, func() (net.Listener, error) { return net.Listen("tcp", addr) })
}

// dialInNetns connects to addr from inside the network namespace of
// process pid: a session's forwarded port reaches what listens on the
// container's own loopback.
func dialInNetns(pid int, addr string) (net.Conn, error) {
	return inNetns(pid, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) })
}

// inNetns makes a socket (open) on a thread inside the network namespace
// of process pid.
//
// setns changes the namespace of one OS thread only; the goroutine keeps
// its thread locked and ends without unlocking it, so Go discards the
// thread instead of running other goroutines in the container's namespace.
func inNetns[T any](pid int, open func() (T, error)) (T, error) {
	var zero T
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return zero, err
	}
	defer ns.Close()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter the network namespace of %d: %w", pid, err)}
			return
		}
		v, err := open()
		done <- result{v, err}
	}()
	r := <-done
	return r.v, r.err
}
