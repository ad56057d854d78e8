package httpx

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/peer"
)

// TrustedProxies is a set of networks whose X-Forwarded-For and X-Real-IP
// headers are believed. The zero value trusts nobody.
type TrustedProxies struct {
	nets []netip.Prefix
}

// ParseTrustedProxies parses CIDRs or bare addresses ("10.0.0.0/8",
// "192.0.2.7", "fd00::/8").
func ParseTrustedProxies(list []string) (TrustedProxies, error) {
	var t TrustedProxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return TrustedProxies{}, fmt.Errorf("trusted proxy %q is not a CIDR", s)
			}
			t.nets = append(t.nets, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return TrustedProxies{}, fmt.Errorf("trusted proxy %q is not an address", s)
		}
		a = a.Unmap()
		t.nets = append(t.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return t, nil
}

// Trusts reports whether a is one of the trusted proxies.
func (t TrustedProxies) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxForwardedHops bounds the work spent on a forged, very long chain.
const maxForwardedHops = 32

// ClientIP returns the address of the client: the peer of the connection,
// unless that peer is a trusted proxy, in which case X-Forwarded-For is
// walked from the right, skipping trusted proxies, and the first untrusted
// hop is the client (X-Real-IP is used when a trusted proxy sent no
// X-Forwarded-For). A header that does not parse ends the walk at the last
// address known to be good. IPv4-mapped IPv6 addresses are unmapped. The
// result is invalid only when the connection's address itself is unknown.
func ClientIP(r *http.Request, trusted TrustedProxies) netip.Addr {
	peer := parseHostPort(r.RemoteAddr)
	if !peer.IsValid() || !trusted.Trusts(peer) {
		return peer
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		if a, ok := parseForwardedAddr(r.Header.Get("X-Real-IP")); ok {
			return a
		}
		return peer
	}
	client := peer
	hops := 0
	// Several header lines form one list, in order.
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for line != "" {
			var hop string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				hop, line = line[j+1:], line[:j]
			} else {
				hop, line = line, ""
			}
			if hops++; hops > maxForwardedHops {
				return client
			}
			a, ok := parseForwardedAddr(hop)
			if !ok {
				return client
			}
			client = a
			if !trusted.Trusts(a) {
				return a
			}
		}
	}
	return client
}

// parseForwardedAddr parses one hop of X-Forwarded-For or X-Real-IP: an
// address, optionally bracketed or with a port.
func parseForwardedAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	if a := parseHostPort(s); a.IsValid() {
		return a, true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

func parseHostPort(s string) netip.Addr { return peer.ParseHostPort(s) }

// ClientAddress is the middleware that resolves each request's client
// address once, through trusted (see ClientIP), for every later reader:
// authentication, the access log, the URLs a response builds. It is the
// only place that reads X-Forwarded-For and X-Real-IP.
func ClientAddress(trusted TrustedProxies) gin.HandlerFunc {
	return func(c *gin.Context) {
		cl := Client{Addr: ClientIP(c.Request, trusted), ViaProxy: trusted.Trusts(parseHostPort(c.Request.RemoteAddr))}
		c.Request = c.Request.WithContext(peer.With(c.Request.Context(), cl))
		c.Next()
	}
}

// Client is where a request came from.
type Client = peer.Client

// ClientOf returns the client of r as ClientAddress resolved it; without
// that middleware, the connection's peer, trusted by nobody.
func ClientOf(r *http.Request) Client { return peer.Of(r) }
