package auth

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/config"
)

// New builds the Authenticator the configuration describes: API keys from
// db behind a KeyCache, bearer tokens with the HS256 secret and/or a JWKS
// (loaded now, and refreshed until ctx ends). lookupTimeout bounds one
// key lookup.
func New(ctx context.Context, cfg config.Auth, db *pgxpool.Pool, lookupTimeout time.Duration, log *slog.Logger) (*Authenticator, error) {
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
	if db != nil {
		keys = NewKeyCache(NewStore(db), cfg.KeyCacheTTL, cfg.KeyCacheSize)
	}
	return NewAuthenticator(Options{
		AnonymousScopes: cfg.AnonymousScopes,
		Trusted:         trusted,
		Keys:            keys,
		Tokens:          tokens,
		Timeout:         lookupTimeout,
	}), nil
}
