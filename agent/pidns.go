package agent

import (
	"os"
	"strconv"
)

// pidNamespace is an isolated workload's PID namespace, known by the
// process that is its init.
//
// The kernel hands a namespace's number ("pid:[N]") to the next namespace
// created as soon as this one ends — the lowest free number goes first —
// so after a workload ended, its namespace's name soon names another
// workload's, on this node or in a neighbour's test. Every use therefore
// first checks that the init holding the namespace is still the same
// process: while it lives the namespace does, and its number is not
// anyone else's. Signalling by the bare name once killed a workload
// started half a second after another one ended.
type pidNamespace struct {
	name      string // "pid:[N]"; empty when not isolated or not readable
	initPID   int    // on the host
	initTicks uint64 // the init's start time, which tells it from a reused pid
}

// namespaceOf is the PID namespace that init leads, or the zero value
// when the process is gone or its namespace cannot be read.
func namespaceOf(init int) pidNamespace {
	ticks, ok := processStartTicks(init)
	if !ok {
		return pidNamespace{}
	}
	name := namespaceName(init)
	if name == "" {
		return pidNamespace{}
	}
	return pidNamespace{name: name, initPID: init, initTicks: ticks}
}

// live: the namespace's init is still the process it was, so the name
// still means this namespace.
func (ns pidNamespace) live() bool {
	if ns.name == "" {
		return false
	}
	if t, ok := processStartTicks(ns.initPID); !ok || t != ns.initTicks {
		return false
	}
	return namespaceName(ns.initPID) == ns.name
}

// holds reports whether process pid is in the namespace.
func (ns pidNamespace) holds(pid int) bool {
	return ns.live() && namespaceName(pid) == ns.name
}

// pids lists the host PIDs of the namespace's processes; none once it has
// ended. The second look at its init tells that the namespace lived all
// through the listing, so no process of a namespace that took its number
// is among them.
func (ns pidNamespace) pids() []int {
	if !ns.live() {
		return nil
	}
	pids := pidsInNamespace(ns.name)
	if !ns.live() {
		return nil
	}
	return pids
}

// namespaceName reads the name of process pid's PID namespace, or "".
func namespaceName(pid int) string {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return ""
	}
	return link
}
