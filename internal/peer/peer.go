// Package peer says where a request came from, as the HTTP edge resolved
// it once (httpx.ClientAddress): authentication names anonymous callers
// by it, and nothing here knows an HTTP framework, so that the rooms
// that read it need none either.
package peer

import (
	"context"
	"net"
	"net/http"
	"net/netip"
)

// Client is where a request came from.
type Client struct {
	// Addr is the client's address; invalid only when the connection's
	// own address is unknown.
	Addr netip.Addr
	// ViaProxy says the connection's peer is a trusted proxy, whose
	// X-Forwarded-Proto and X-Forwarded-Host may be believed too.
	ViaProxy bool
}

type key struct{}

// With returns ctx carrying cl as its request's client.
func With(ctx context.Context, cl Client) context.Context {
	return context.WithValue(ctx, key{}, cl)
}

// Of returns the client of r as the edge resolved it; without that, the
// connection's peer, trusted by nobody.
func Of(r *http.Request) Client {
	if cl, ok := r.Context().Value(key{}).(Client); ok {
		return cl
	}
	return Client{Addr: ParseHostPort(r.RemoteAddr)}
}

// ParseHostPort is the address of "host:port" or of a bare host; invalid
// when it is neither.
func ParseHostPort(s string) netip.Addr {
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}
