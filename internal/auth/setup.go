package auth

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/config"
)

// Deps are what New builds an Authenticator from.
type Deps struct {
	// DB holds the api_keys table; nil refuses every API key.
	DB *pgxpool.Pool
	// LookupTimeout bounds one key lookup in DB.
	LookupTimeout time.Duration
	Log           *slog.Logger
	// Registerer, if set, receives the auth metrics.
	Registerer prometheus.Registerer
}

// New builds the Authenticator the configuration describes: API keys from
// the database behind a KeyCache, bearer tokens with the HS256 secret
// and/or a JWKS (loaded now, and refreshed until ctx ends).
func New(ctx context.Context, cfg config.Auth, d Deps) (*Authenticator, error) {
	log := d.Log
	for _, s := range cfg.AnonymousScopes {
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("AUTH_ANONYMOUS_SCOPES: unknown scope %q (known: %v, or none)", s, AllScopes)
		}
	}
	trusted, err := ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("TRUSTED_PROXIES: %w", err)
	}
	var jwks *JWKS
	switch {
	case cfg.JWKSURL != "":
		jwks = NewJWKSURL(cfg.JWKSURL, nil, cfg.JWKSRefresh, log)
	case cfg.JWKSFile != "":
		jwks = NewJWKSFile(cfg.JWKSFile, cfg.JWKSRefresh, log)
	}
	if jwks != nil {
		if err := jwks.Start(ctx); err != nil {
			return nil, err
		}
	}
	tokens, err := NewTokenVerifier(TokenOptions{
		HS256Secret: []byte(cfg.JWTSecret),
		JWKS:        jwks,
		Issuers:     cfg.Issuers,
		Audiences:   cfg.Audiences,
		Leeway:      cfg.Leeway,
		Algorithms:  cfg.Algorithms,
	})
	if err != nil {
		return nil, err
	}
	var keys KeyVerifier
	if d.DB != nil {
		keys = NewKeyCache(NewStore(d.DB), cfg.KeyCacheTTL, cfg.KeyCacheSize)
	}
	return NewAuthenticator(Options{
		AnonymousScopes: cfg.AnonymousScopes,
		Trusted:         trusted,
		Keys:            keys,
		Tokens:          tokens,
		Timeout:         d.LookupTimeout,
		Registerer:      d.Registerer,
	}), nil
}
