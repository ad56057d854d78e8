package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DefaultRoleClaim is the token claim that names the database role a
// token's requests run as, PostgREST's name for it.
const DefaultRoleClaim = "role"

// roleName is what a database role geogate runs as may be called:
// lower-case, unquoted identifiers only, so that a name never needs
// quoting to mean what it says.
var roleName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidRole reports whether r may name a database role for callers.
func ValidRole(r string) bool { return roleName.MatchString(r) }

// MaxClaims bounds the claims a key carries, as stored JSON.
const MaxClaims = 4096

// reservedClaims are the claims geogate sets itself for a key: its own
// claims may not replace them.
var reservedClaims = []string{"role", "sub", "key", "tier", "account"}

// ReservedClaim reports whether name is a claim a key's own claims may
// not set.
func ReservedClaim(name string) bool {
	for _, r := range reservedClaims {
		if r == name {
			return true
		}
	}
	return false
}

// keyClaims is request.jwt.claims for a key: its own claims, then what
// geogate knows of it, which they cannot replace.
func keyClaims(k Key) string {
	m := map[string]any{}
	if len(k.DBClaims) > 0 {
		_ = json.Unmarshal(k.DBClaims, &m) // stored as an object (migration 00026)
	}
	m["sub"] = KindKey + ":" + k.ID
	m["key"] = k.ID
	for name, v := range map[string]string{"role": k.DBRole, "tier": k.Tier, "account": k.Account} {
		if v != "" {
			m[name] = v
		} else {
			delete(m, name)
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// tokenClaims is the verified payload of tok, request.jwt.claims for a
// token: every claim it carries, as its issuer signed them.
func tokenClaims(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "{}"
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || !json.Valid(b) {
		return "{}"
	}
	return string(b)
}

// CheckKeyClaims returns why raw cannot be a key's own claims, or nil: a
// JSON object of at most MaxClaims bytes that sets none of the claims
// geogate sets itself (reservedClaims).
func CheckKeyClaims(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if len(raw) > MaxClaims || json.Unmarshal(raw, &m) != nil || m == nil {
		return errors.New("claims are a JSON object of at most 4096 bytes")
	}
	for name := range m {
		if ReservedClaim(name) {
			return fmt.Errorf("claim %q is set by geogate (%s are)", name, strings.Join(reservedClaims, ", "))
		}
	}
	return nil
}
