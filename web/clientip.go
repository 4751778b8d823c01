package web

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// ParseCIDRs reads a comma-separated list of networks ("10.0.0.0/8") or
// single addresses ("192.0.2.7", "::1"), as --trusted-proxies and
// --metrics-allow take them. An empty list is no network.
func ParseCIDRs(list string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.Contains(item, "/") {
			ip := net.ParseIP(item)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither an address nor a network (CIDR)", item)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network (CIDR): %w", item, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func contains(nets []*net.IPNet, ip net.IP) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// peerIP is the address the TCP connection comes from.
func peerIP(r *http.Request) net.IP {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return net.ParseIP(host)
}

// ipExtractor finds the client's address for rate limits, logs and the
// metrics allow-list. X-Forwarded-For is believed only when the request
// comes from a configured proxy (--trusted-proxies, none by default):
// otherwise any client could claim any address, dodging the login limit
// or locking others out.
func (s *Server) ipExtractor() echo.IPExtractor {
	if len(s.cfg.TrustedProxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range s.cfg.TrustedProxies {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// fromTrustedProxy reports whether the request's forwarding headers
// (X-Forwarded-Proto) may be believed.
func (s *Server) fromTrustedProxy(r *http.Request) bool {
	ip := peerIP(r)
	return ip != nil && contains(s.cfg.TrustedProxies, ip)
}

// metricsAllowed serves /metrics only to the addresses of --metrics-allow
// (everyone when it is empty). A refusal is plain text, as scrapers read.
func (s *Server) metricsAllowed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(s.cfg.MetricsAllow) > 0 {
			ip := net.ParseIP(c.RealIP())
			if ip == nil || !contains(s.cfg.MetricsAllow, ip) {
				return c.String(http.StatusForbidden, "403 forbidden: the metrics are not served to this address (--metrics-allow)\n")
			}
		}
		return next(c)
	}
}
