// Package webhooks delivers the webhook outbox: bounded workers post each
// endpoint's oldest delivery, signed, through an HTTP client that reaches
// public addresses only, and record what came of it (DESIGN §6,
// Automation; §8, no SSRF).
package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"

	"gpuportal"
)

// notPublic are the ranges a webhook may never reach: this host, private
// networks, link-local, CGNAT, documentation, benchmarking, multicast and
// the reserved rest (IANA's special-purpose registries), and the IPv6
// forms that carry an IPv4 address inside (NAT64, 6to4, Teredo).
var notPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32",
		"2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Public reports whether a webhook may be delivered to addr.
func Public(addr netip.Addr) bool {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if !addr.IsValid() || addr.Zone() != "" {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(addr) {
			return false
		}
	}
	return addr.IsGlobalUnicast()
}

// Resolver looks names up (net.DefaultResolver; tests give their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL is the check at a webhook's creation: an http(s) URL whose
// host is, or resolves only to, public addresses (any address when
// allowPrivate). A 400 naming the url field otherwise.
func CheckURL(ctx context.Context, r Resolver, rawURL string, allowPrivate bool) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "url", "The webhook's address must be an http:// or https:// URL.")
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else {
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "url", "The webhook's host %s does not resolve.", host)
		}
	}
	for _, a := range addrs {
		if !Public(a) {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "url", "The webhook's host %s is %s, not a public address: webhooks go to the internet only.", host, a.Unmap())
		}
	}
	return nil
}

// refusePrivate is a dialer's Control: it sees the address actually
// dialled, after every lookup and redirect, so DNS rebinding cannot
// reach the portal's network.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("webhook address %s: %w", address, err)
	}
	if !Public(addr) {
		return fmt.Errorf("refused: %s is not a public address", addr.Unmap())
	}
	return nil
}
