package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
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

// resolveInside looks host up as the container of process pid would: an
// IP address is itself; a name is asked of the name servers of the
// container's /etc/resolv.conf, over sockets made inside its network
// namespace (so the node's own resolver is never asked on its behalf).
func resolveInside(pid int, host string) (string, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String(), nil
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
	if err != nil {
		return "", fmt.Errorf("the instance's name servers: %w", err)
	}
	var servers []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if ip, err := netip.ParseAddr(f[1]); err == nil && ip.Is4() {
				servers = append(servers, net.JoinHostPort(ip.String(), "53"))
			}
		}
	}
	if len(servers) == 0 {
		return "", errors.New("the instance has no name server")
	}
	var next atomic.Int64
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		server := servers[int(next.Add(1)-1)%len(servers)]
		return inNetns(pid, func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		})
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return "", err
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("%s has no IPv4 address", host)
	}
	return addrs[0].String(), nil
}
