// Package auth turns the credentials of a request (an API key, a bearer
// JWT, or nothing but the connection's address) into one Identity: who is
// calling, which scopes it holds, which part of the world it may query, and
// the string the rate limiter counts it under.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"slices"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
)

// Scopes a route may require.
const (
	ScopeProximityRead  = "proximity:read"  // GET /within
	ScopeGeofencesRead  = "geofences:read"  // reading geofences and containment
	ScopeGeofencesWrite = "geofences:write" // creating, changing, deleting geofences
	ScopeTilesRead      = "tiles:read"      // vector tiles
	ScopeFeaturesRead   = "features:read"   // OGC API feature pages
	ScopeFeaturesWrite  = "features:write"  // OGC API Part 4: creating, replacing, updating, deleting features
	ScopePositionsWrite = "positions:write" // reporting devices' positions
	ScopeEventsRead     = "events:read"     // one's subscriptions, events and devices
	ScopeEventsWrite    = "events:write"    // creating, changing, deleting subscriptions
	// ScopeAdmin is key administration (the /admin/ routes): creating,
	// changing, rotating and revoking API keys, and reading the audit
	// trail. Anonymous callers can never hold it.
	ScopeAdmin = "admin"
)

// AllScopes lists every scope geogate knows, in a stable order.
var AllScopes = []string{ScopeProximityRead, ScopeGeofencesRead, ScopeGeofencesWrite, ScopeTilesRead, ScopeFeaturesRead, ScopeFeaturesWrite,
	ScopePositionsWrite, ScopeEventsRead, ScopeEventsWrite, ScopeAdmin}

// ReadScopes are the scopes that only read; anonymous callers get them by
// default in development. ScopeAdmin is not one of them.
var ReadScopes = []string{ScopeProximityRead, ScopeGeofencesRead, ScopeTilesRead, ScopeFeaturesRead}

// Identity kinds.
const (
	KindKey = "key" // an API key; ID is the public key id
	KindSub = "sub" // a JWT; ID is the subject, qualified by issuer when several are trusted
	KindIP  = "ip"  // anonymous; ID is the client address (IPv6 grouped by /64)
)

// Identity is who is calling. The zero Identity is an anonymous caller
// with no scopes and no address: it may do nothing.
type Identity struct {
	Kind string
	// ID is the key id, the (possibly issuer-qualified) subject, or the
	// client address. It is never a secret or a token.
	ID     string
	Scopes []string
	// Tier is the rate tier granted by the key or the token, "" if none.
	Tier string
	// Account is the client a key belongs to, "" for none (and for
	// tokens and anonymous callers).
	Account string
	// Spatial is the part of the world the caller may query; nil means the
	// whole world.
	Spatial *spatial.Scope
	// Layers are the layer ids and patterns the caller may read (see
	// MayRead); nil means every layer.
	Layers []string
	// Anonymous is true when the request carried no credentials.
	Anonymous bool
	// DBRole is the database role the caller's requests run as on layers
	// that run as their caller (a key's db_role, a token's role claim),
	// "" for none.
	DBRole string
	// Claims are a token's verified claims, a JSON object, or a key's
	// as ClaimsJSON makes them; KeyClaims a key's own (db_claims).
	Claims    string
	KeyClaims json.RawMessage
}

// ClaimsJSON is what the row-level security policies of a layer that
// runs as its caller read as request.jwt.claims: a token's claims as
// signed, or a key's own claims with what geogate knows of the key
// (sub, key, role, tier, account), which they cannot replace; "{}" for
// an anonymous caller.
func (id Identity) ClaimsJSON() string {
	switch {
	case id.Claims != "":
		return id.Claims // a token's, or a key's made when it was read
	case id.Kind == KindKey:
		return keyClaims(Key{ID: id.ID, DBRole: id.DBRole, Tier: id.Tier, Account: id.Account, DBClaims: id.KeyClaims})
	}
	return "{}"
}

// Has reports whether the identity holds scope.
func (id Identity) Has(scope string) bool { return slices.Contains(id.Scopes, scope) }

// LimitKey returns the string the rate limiter counts this identity under:
// key:<key id>, sub:<subject> or ip:<address>. IDs with characters that
// would be awkward in a Redis key (spaces, braces, control characters) or
// that are very long are replaced by a hash of themselves, so the result is
// always short, printable and free of Redis Cluster hash-tag braces.
func (id Identity) LimitKey() string {
	kind := id.Kind
	if kind == "" {
		kind = KindIP
	}
	if id.ID == "" {
		return kind + ":unknown"
	}
	if safeKeyPart(id.ID) {
		return kind + ":" + id.ID
	}
	sum := sha256.Sum256([]byte(id.ID))
	return kind + ":h:" + hex.EncodeToString(sum[:16])
}

func safeKeyPart(s string) bool {
	if len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '@' || c == '|' || c == '+' || c == '=' || c == '~':
		default:
			return false
		}
	}
	return true
}

type ctxKey struct{}

// WithIdentity returns a copy of ctx that carries id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity stored by the middleware, or the zero
// Identity (anonymous, no scopes) when there is none.
func FromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(ctxKey{}).(Identity)
	return id
}

// Errors the package returns; their messages are safe to show a client.
var (
	// ErrUnauthenticated: the route needs credentials and the request had none.
	ErrUnauthenticated = apperr.New(apperr.Unauthenticated, "Authentication required: send an API key in the x-api-key header or a bearer token in the Authorization header.")

	errBothCredentials = apperr.New(apperr.Unauthenticated, "Send either an x-api-key header or an Authorization header, not both.")
	errMalformedAuthz  = apperr.New(apperr.Unauthenticated, "The Authorization header must be \"Bearer <token>\" or \"Basic <key id:secret>\".")
	errMalformedBasic  = apperr.New(apperr.Unauthenticated, "Basic credentials must be base64 of \"<key id>:<secret>\" (the key id may be left empty).")
	errMalformedKey    = apperr.New(apperr.Unauthenticated, "The x-api-key header is malformed.")
	errInvalidKey      = apperr.New(apperr.Unauthenticated, "The API key is not valid.")
	errExpiredKey      = apperr.New(apperr.Unauthenticated, "The API key has expired.")
	errRotatedKey      = apperr.New(apperr.Unauthenticated, "The API key's secret was replaced by a new one and no longer works.")
	errInvalidToken    = apperr.New(apperr.Unauthenticated, "The bearer token is not valid.")
	errExpiredToken    = apperr.New(apperr.Unauthenticated, "The bearer token has expired.")
	errEarlyToken      = apperr.New(apperr.Unauthenticated, "The bearer token is not valid yet.")
	errTokenIssuer     = apperr.New(apperr.Unauthenticated, "The bearer token was issued by an issuer this service does not trust.")
	errTokenAudience   = apperr.New(apperr.Unauthenticated, "The bearer token is not meant for this service (audience).")
	errTokenClaims     = apperr.New(apperr.Unauthenticated, "The bearer token lacks a required claim (sub, exp) or has a malformed one.")
	errTokenGeoScope   = apperr.New(apperr.Unauthenticated, "The bearer token has a malformed geo_scope claim: it must be [minLng, minLat, maxLng, maxLat] or a GeoJSON Polygon or MultiPolygon in WGS84 whose rings neither cross nor touch themselves or each other.")
	errNoTokens        = apperr.New(apperr.Unauthenticated, "This service does not accept bearer tokens.")
	errKeyUnavailable  = apperr.New(apperr.Unavailable, "Credentials cannot be verified right now; try again shortly.")
)

// IPKey returns the identity of an anonymous client at a: the address for
// IPv4, and the /64 network for IPv6, since one host commonly holds a whole
// /64 ("2001:db8:1:2::/64").
func IPKey(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// ScopeOf is the part of the world the caller of ctx may reach; nil is
// the whole world.
func ScopeOf(ctx context.Context) *spatial.Scope { return FromContext(ctx).Spatial }

// Owner is whom the identity's devices and subscriptions belong to: its
// limit key; "" for an anonymous caller, who owns none.
func (id Identity) Owner() string {
	if id.Anonymous || id.Kind == KindIP {
		return ""
	}
	return id.LimitKey()
}
