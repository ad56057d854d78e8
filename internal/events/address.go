package events

import (
	"net/netip"
	"strings"
)

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
// checked again, address by address, when a delivery connects.
func privateHost(host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return PrivateAddr(ip)
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
