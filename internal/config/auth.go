package config

import (
	"net/netip"
	"strings"
	"time"
)

// Auth holds the settings of internal/auth: who may call, and how callers
// prove it.
type Auth struct {
	// AnonymousScopes are granted to requests without credentials
	// (AUTH_ANONYMOUS_SCOPES; "none" grants nothing).
	AnonymousScopes []string
	// TrustedProxies are CIDRs or addresses whose X-Forwarded-For and
	// X-Real-IP headers are believed.
	TrustedProxies []string
	// KeyCacheTTL is how long a verified (or unknown) API key is remembered
	// in process; a revoke takes effect within it.
	KeyCacheTTL time.Duration
	// KeyCacheSize bounds the number of remembered keys.
	KeyCacheSize int
	// JWTSecret is the HS256 shared secret; empty disables HS256.
	JWTSecret string
	// JWKSURL and JWKSFile name a JSON Web Key Set for RS256, ES256 and
	// EdDSA tokens; at most one may be set.
	JWKSURL  string
	JWKSFile string
	// JWKSRefresh is how often the key set is reloaded.
	JWKSRefresh time.Duration
	// Issuers and Audiences, when set, must match the iss and aud claims.
	Issuers   []string
	Audiences []string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// Algorithms is the allow-list of JWT algorithms; empty means every
	// algorithm that a configured key can verify.
	Algorithms []string
}

func loadAuth(r *reader) Auth {
	a := Auth{
		AnonymousScopes: r.list("AUTH_ANONYMOUS_SCOPES", []string{"proximity:read", "geofences:read", "tiles:read"}),
		TrustedProxies:  r.list("TRUSTED_PROXIES", nil),
		KeyCacheTTL:     r.duration("API_KEY_CACHE_TTL", 5*time.Second),
		KeyCacheSize:    r.integer("API_KEY_CACHE_SIZE", 10000, 16, 10_000_000),
		JWTSecret:       r.str("JWT_HS256_SECRET", ""),
		JWKSURL:         r.str("JWT_JWKS_URL", ""),
		JWKSFile:        r.str("JWT_JWKS_FILE", ""),
		JWKSRefresh:     r.duration("JWT_JWKS_REFRESH", 15*time.Minute),
		Issuers:         r.list("JWT_ISSUER", nil),
		Audiences:       r.list("JWT_AUDIENCE", nil),
		Leeway:          r.duration("JWT_LEEWAY", 30*time.Second),
		Algorithms:      r.list("JWT_ALGORITHMS", nil),
	}
	if len(a.AnonymousScopes) == 1 && strings.EqualFold(a.AnonymousScopes[0], "none") {
		a.AnonymousScopes = nil
	}
	for _, p := range a.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(p); err != nil {
			r.fail("TRUSTED_PROXIES", p, "not a CIDR (10.0.0.0/8) or an address")
		}
	}
	if a.JWTSecret != "" && len(a.JWTSecret) < 32 {
		r.fail("JWT_HS256_SECRET", "(hidden)", "must be at least 32 characters; generate one with: openssl rand -hex 32")
	}
	if a.JWKSURL != "" && a.JWKSFile != "" {
		r.fail("JWT_JWKS_FILE", a.JWKSFile, "set JWT_JWKS_URL or JWT_JWKS_FILE, not both")
	}
	if a.JWKSURL != "" {
		r.urlWithScheme("JWT_JWKS_URL", a.JWKSURL, "https", "http")
	}
	for _, iss := range a.Issuers {
		if strings.Contains(iss, "|") {
			// Subjects are qualified as <issuer>|<subject>.
			r.fail("JWT_ISSUER", iss, "must not contain '|'")
		}
	}
	if a.Leeway > 5*time.Minute {
		r.fail("JWT_LEEWAY", a.Leeway.String(), "must be at most 5m")
	}
	for _, alg := range a.Algorithms {
		switch alg {
		case "HS256", "RS256", "ES256", "EdDSA":
		default:
			r.fail("JWT_ALGORITHMS", alg, "must be among HS256, RS256, ES256, EdDSA")
		}
	}
	return a
}
