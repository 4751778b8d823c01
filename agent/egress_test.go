package agent

import (
	"net/netip"
	"slices"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// What a bridge workload may reach: the internet, its DNS server and what
// the operator allows; never the node, the bridge or private ranges.
func TestPlanEgress(t *testing.T) {
	gw := netip.MustParseAddr("10.88.0.1")
	for _, tc := range []struct {
		name                 string
		subnets              []netip.Prefix
		node, nameservers    []netip.Addr
		allow                []netip.Prefix
		reachable, blackhole []string // each must (not) be in the plan
	}{
		{
			name: "podman's default bridge", subnets: prefixes("10.88.0.0/16"), node: addrs("192.0.2.2", "203.0.113.40", "fe80::1"),
			reachable: []string{"0.0.0.0/0"},
			blackhole: []string{"10.0.0.0/8", "10.88.0.0/16", "10.88.0.1/32", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "192.0.2.2/32", "203.0.113.40/32", "224.0.0.0/4"},
		},
		{
			name: "a bridge subnet outside the private ranges is closed too", subnets: prefixes("198.20.0.0/24"),
			reachable: []string{"0.0.0.0/0"}, blackhole: []string{"198.20.0.0/24", "10.88.0.1/32"},
		},
		{
			name: "the resolver in a private range stays reachable", nameservers: addrs("10.255.255.53", "127.0.0.53", "2001:db8::53"),
			reachable: []string{"0.0.0.0/0", "10.255.255.53/32"}, blackhole: []string{"10.0.0.0/8"},
		},
		{
			name: "a resolver on the node stays closed", nameservers: addrs("10.88.0.1", "192.0.2.2"), node: addrs("192.0.2.2"),
			reachable: []string{"0.0.0.0/0"}, blackhole: []string{"10.88.0.1/32", "192.0.2.2/32"},
		},
		{
			name: "the operator's mirror", allow: prefixes("10.20.30.0/24", "172.16.0.0/12", "fd00::/8"),
			reachable: []string{"0.0.0.0/0", "10.20.30.0/24", "172.16.0.0/12"}, blackhole: []string{"10.0.0.0/8", "192.168.0.0/16"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planEgress(gw, tc.subnets, tc.node, tc.nameservers, tc.allow)
			var via, hole []string
			for _, p := range plan.Via {
				via = append(via, p.String())
			}
			for _, p := range plan.Blackhole {
				hole = append(hole, p.String())
			}
			if plan.Gateway != gw || via[0] != "0.0.0.0/0" {
				t.Errorf("gateway %s, first route %s: want the default route through %s first", plan.Gateway, via[0], gw)
			}
			if len(via) != len(tc.reachable) {
				t.Errorf("through the gateway: %v; want %v", via, tc.reachable)
			}
			for _, p := range tc.reachable {
				if !slices.Contains(via, p) || slices.Contains(hole, p) {
					t.Errorf("%s not reachable: via %v, blackholes %v", p, via, hole)
				}
			}
			for _, p := range tc.blackhole {
				if !slices.Contains(hole, p) || slices.Contains(via, p) {
					t.Errorf("%s not a blackhole: via %v, blackholes %v", p, via, hole)
				}
			}
			for _, p := range append(plan.Via, plan.Blackhole...) {
				if !p.Addr().Is4() {
					t.Errorf("an IPv6 route %s in an IPv4-only container", p)
				}
			}
		})
	}
}

func TestParseNameservers(t *testing.T) {
	got := parseNameservers([]byte("# generated\nsearch example.org\nnameserver 10.255.255.53\nnameserver  2001:db8::1 \nnameserver bogus\noptions ndots:2\n"))
	if want := addrs("10.255.255.53", "2001:db8::1"); !slices.Equal(got, want) {
		t.Fatalf("nameservers %v; want %v", got, want)
	}
}
