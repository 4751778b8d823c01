package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// A workload on --workload-network bridge reaches the internet and nothing
// of the operator's: not the node, not its neighbours on the bridge (other
// tenants), not the private networks behind the node (other nodes, the
// portal's database, the cloud's metadata service at 169.254.169.254).
//
// The agent enforces this with routes in the container's own network
// namespace, set before the workload starts. The workload has no
// capabilities (no CAP_NET_ADMIN), so it cannot change them; nothing is
// needed on the node beyond what the container engine already set up.
//
//   - every private, shared, link-local and reserved IPv4 range, the
//     bridge's own subnet among them, and each address of the node is a
//     blackhole route: a connect fails at once ("network is unreachable");
//   - the default route goes to the bridge's gateway "onlink", so the
//     gateway stays the next hop while the gateway as a destination (the
//     node) is a blackhole too;
//   - the container's DNS servers (its resolv.conf) and the operator's
//     --workload-egress-allow ranges are routed through the gateway again:
//     a more specific route wins.
//
// IPv6 is switched off in such containers (a sysctl on the create line),
// so these IPv4 routes are the whole story.

// nonInternetIPv4 are the IPv4 ranges that are not the public internet
// (RFC 6890's special-purpose registry, less the few that are global).
var nonInternetIPv4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("10.0.0.0/8"),      // private
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (shared)
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local: cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),   // private
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.168.0.0/16"),  // private
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
}

// egressRoutes is what the container's main routing table holds once the
// agent is done: blackholes, and routes through the gateway.
type egressRoutes struct {
	Gateway   netip.Addr
	Blackhole []netip.Prefix // unreachable destinations
	Via       []netip.Prefix // reachable through the gateway (the default route first)
}

// planEgress decides the container's routes from its gateway, the subnets
// its engine connected it to (the bridge: other tenants), the node's own
// addresses, its DNS servers and the operator's allowed ranges. Only IPv4
// takes part (IPv6 is off in the container).
//
// A DNS server that is the node itself stays unreachable (the node is
// never a destination); one elsewhere in a private range is reachable.
// An allowed range equal to a blocked one lifts the block.
func planEgress(gateway netip.Addr, subnets []netip.Prefix, nodeAddrs, nameservers []netip.Addr, allow []netip.Prefix) egressRoutes {
	gateway = gateway.Unmap()
	r := egressRoutes{Gateway: gateway}
	node := map[netip.Addr]bool{gateway: true}
	for _, a := range nodeAddrs {
		node[a.Unmap()] = true
	}
	via := map[netip.Prefix]bool{}
	addVia := func(p netip.Prefix) {
		if p.Addr().Is4() && !via[p.Masked()] {
			via[p.Masked()] = true
			r.Via = append(r.Via, p.Masked())
		}
	}
	addVia(netip.MustParsePrefix("0.0.0.0/0"))
	for _, ns := range nameservers {
		if ns = ns.Unmap(); ns.Is4() && !ns.IsLoopback() && !node[ns] {
			addVia(netip.PrefixFrom(ns, 32))
		}
	}
	for _, p := range allow {
		addVia(p)
	}

	blocked := map[netip.Prefix]bool{}
	block := func(p netip.Prefix) {
		p = p.Masked()
		if p.Addr().Is4() && !blocked[p] && !via[p] {
			blocked[p] = true
			r.Blackhole = append(r.Blackhole, p)
		}
	}
	for _, p := range nonInternetIPv4 {
		block(p)
	}
	for _, p := range subnets {
		block(p)
	}
	block(netip.PrefixFrom(gateway, 32)) // the node, as the bridge sees it
	for _, a := range nodeAddrs {
		if a = a.Unmap(); a.Is4() {
			block(netip.PrefixFrom(a, 32))
		}
	}
	return r
}

// isolateEgress applies the plan to the network namespace of process pid
// (the container's init, before its command runs).
func isolateEgress(pid int, nodeAddrs []netip.Addr, allow []netip.Prefix) error {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return fmt.Errorf("open the network namespace of %d: %w", pid, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in the network namespace of %d: %w", pid, err)
	}
	defer h.Close()

	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list the container's routes: %w", err)
	}
	var gateway netip.Addr
	var link, priority int
	var subnets []netip.Prefix
	for _, rt := range routes {
		switch {
		case rt.Dst == nil || rt.Dst.String() == "0.0.0.0/0":
			if g, ok := netip.AddrFromSlice(rt.Gw); ok {
				gateway, link, priority = g.Unmap(), rt.LinkIndex, rt.Priority
			}
		case rt.Scope == netlink.SCOPE_LINK:
			if p, ok := prefixOf(rt.Dst); ok {
				subnets = append(subnets, p)
			}
		}
	}
	if !gateway.IsValid() {
		return fmt.Errorf("the container has no default route to isolate")
	}
	plan := planEgress(gateway, subnets, nodeAddrs, readNameservers(pid), allow)

	// The routes through the gateway first, "onlink": the gateway stays the
	// next hop once the bridge's subnet (and the gateway itself) are
	// blackholes.
	for i, p := range plan.Via {
		rt := &netlink.Route{
			LinkIndex: link, Dst: ipNet(p), Gw: plan.Gateway.AsSlice(),
			Flags: int(netlink.FLAG_ONLINK), Scope: netlink.SCOPE_UNIVERSE,
		}
		if i == 0 {
			rt.Priority = priority // the engine's default route, replaced
		}
		if err := h.RouteReplace(rt); err != nil {
			return fmt.Errorf("route %s through the gateway: %w", p, err)
		}
	}
	for _, p := range plan.Blackhole {
		// Replace: the bridge's subnet has a route already (the connected
		// one), which the blackhole takes the place of.
		if err := h.RouteReplace(&netlink.Route{Dst: ipNet(p), Type: unix.RTN_BLACKHOLE}); err != nil {
			return fmt.Errorf("blackhole %s: %w", p, err)
		}
	}
	return nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// readNameservers lists the DNS servers of the container's resolv.conf, so
// that name lookups keep working when the resolver sits in a private range.
func readNameservers(pid int) []netip.Addr {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
	if err != nil {
		return nil
	}
	return parseNameservers(b)
}

func parseNameservers(b []byte) []netip.Addr {
	var out []netip.Addr
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

// nodeAddresses lists the node's own IPv4 addresses (of the agent's
// network namespace, the node's), which workloads must not reach.
func nodeAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && !ip.IsLoopback() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
