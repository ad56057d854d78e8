package fairshare

import (
	"cmp"
	"net/netip"
)

// The ways callers are grouped into the identities the queue weighs.
const (
	// ByKey weighs each key, token subject and client address alone.
	ByKey = "key"
	// ByAccount weighs the keys of one account together, and anonymous
	// callers by their network: a client spread over many keys, or many
	// addresses of one network, is one caller. A key without an account
	// is its own.
	ByAccount = "account"
	// ByTier weighs every caller of one tier together.
	ByTier = "tier"
)

// Groupings lists the ways callers may be grouped.
var Groupings = []string{ByKey, ByAccount, ByTier}

// Grouping says whom the queue weighs as one caller.
type Grouping struct {
	// By is ByKey, ByAccount (the default) or ByTier.
	By string
	// IPv4Bits and IPv6Bits are the networks anonymous callers are
	// grouped by under ByAccount (24 and 48 by default).
	IPv4Bits, IPv6Bits int
}

// Caller is what a Grouping knows of a request's caller.
type Caller struct {
	// Key is the identity it is rate limited as (key:, sub: or ip:).
	Key string
	// Account is a key's account, "" for none.
	Account string
	Tier    string
	// Anonymous callers are known by Addr, where they came from.
	Anonymous bool
	Addr      netip.Addr
}

// Name is the identity the queue weighs c as.
func (g Grouping) Name(c Caller) string {
	switch g.By {
	case ByKey:
		return c.Key
	case ByTier:
		return "tier:" + c.Tier
	}
	switch {
	case c.Account != "":
		return "account:" + c.Account
	case c.Anonymous && c.Addr.IsValid():
		a := c.Addr.Unmap()
		bits := cmp.Or(g.IPv4Bits, 24)
		if a.Is6() {
			bits = cmp.Or(g.IPv6Bits, 48)
		}
		p, _ := a.Prefix(bits)
		return "net:" + p.String()
	}
	return c.Key
}
