// Package webhook says where a webhook may point: the rules a
// subscription's URL is checked by when it is written, and the check on
// each address a delivery connects to.
package webhook

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// Rules are where webhooks may point, read once from
// EVENTS_ALLOW_HTTP_WEBHOOKS and EVENTS_ALLOW_PRIVATE_WEBHOOKS.
type Rules struct {
	// AllowHTTP lets webhooks be plain http.
	AllowHTTP bool
	// AllowPrivate lets webhooks point to this machine or a private
	// network, and deliveries connect there.
	AllowPrivate bool
}

// Check says what is wrong with a webhook URL, or "". A webhook is https
// to a public host; plain http needs AllowHTTP, and a host on this
// machine or a private network needs AllowPrivate.
func (r Rules) Check(raw string) string {
	if raw == "" {
		return "" // pull only
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || len(raw) > 2048 || (u.Scheme != "https" && u.Scheme != "http"):
		return "Must be an absolute http(s) URL of at most 2048 bytes."
	case u.User != nil:
		return "Must not hold credentials: deliveries are signed instead."
	case privateHost(u.Hostname()) && !r.AllowPrivate:
		return "Must not point to this machine or a private network (EVENTS_ALLOW_PRIVATE_WEBHOOKS allows it)."
	case u.Scheme == "http" && !r.AllowHTTP && !(r.AllowPrivate && privateHost(u.Hostname())):
		return "Must be https (plain http only to a private host where private webhooks are allowed, or with EVENTS_ALLOW_HTTP_WEBHOOKS)."
	}
	return ""
}

// PrivateAddr says whether ip is an address a webhook may not reach
// unless private webhooks are allowed: this machine, a private or
// link-local network (the cloud metadata services live there), or an
// address that names no single host. A subscriber could otherwise have
// geogate send requests into the network it runs in.
func PrivateAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() ||
		sharedAddressSpace.Contains(ip)
}

// sharedAddressSpace is the carrier-grade NAT range (RFC 6598), private
// in all but name.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// privateHost says whether a webhook's host is private on its face: an
// address PrivateAddr refuses, or a name for this machine. Names are
// checked again, address by address, when a delivery connects
// (RefusePrivate).
func privateHost(host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return PrivateAddr(ip)
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// ErrPrivate refuses a connection to a private address.
var ErrPrivate = errors.New("the webhook's address is on this machine or a private network")

// RefusePrivate is a net.Dialer's Control that refuses private
// addresses. It checks the address connected to, after name resolution,
// so that a name that resolves (or later re-resolves) to this machine or
// a private network is refused too.
func RefusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || PrivateAddr(ap.Addr()) {
		return ErrPrivate
	}
	return nil
}
