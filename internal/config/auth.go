package config

import (
	"strings"
	"time"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
)

// loadAuth reads the authentication settings; a key lookup is one query,
// bounded like every other.
func loadAuth(r *reader, db DB) auth.Settings {
	a := auth.Settings{
		AnonymousScopes: r.list("AUTH_ANONYMOUS_SCOPES", auth.ReadScopes),
		LookupTimeout:   db.QueryTimeout,
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
		RoleClaim:       r.str("JWT_ROLE_CLAIM", auth.DefaultRoleClaim),
	}
	if len(a.AnonymousScopes) == 1 && strings.EqualFold(a.AnonymousScopes[0], "none") {
		a.AnonymousScopes = nil
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

// loadTrustedProxies reads TRUSTED_PROXIES, the one list every reader of a
// client address goes by.
func loadTrustedProxies(r *reader) httpx.TrustedProxies {
	var ok []string
	for _, p := range r.list("TRUSTED_PROXIES", nil) {
		if _, err := httpx.ParseTrustedProxies([]string{p}); err != nil {
			r.fail("TRUSTED_PROXIES", p, "not a CIDR (10.0.0.0/8) or an address")
			continue
		}
		ok = append(ok, p)
	}
	t, _ := httpx.ParseTrustedProxies(ok)
	return t
}
