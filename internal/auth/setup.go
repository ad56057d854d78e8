package auth

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/pg"
)

// Settings configure authentication; internal/config fills them.
type Settings struct {
	// AnonymousScopes are granted to requests without credentials.
	AnonymousScopes []string
	// KeyCacheTTL is how long a verified (or unknown) API key is
	// remembered in process. A change to a key reaches the cache at once
	// through KeyEvents; the TTL bounds it while the listener is down.
	KeyCacheTTL time.Duration
	// KeyCacheSize bounds the number of remembered keys.
	KeyCacheSize int
	// LookupTimeout bounds one key lookup in the database.
	LookupTimeout time.Duration
	// JWTSecret is the HS256 shared secret; empty turns HS256 off.
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
	// RoleClaim names the token claim of the database role (JWT_ROLE_CLAIM).
	RoleClaim string
}

// Deps are what New builds an Authenticator from.
type Deps struct {
	// DB holds the api_keys table; nil refuses every API key.
	DB  *pgxpool.Pool
	Log *slog.Logger
	// Registerer, if set, receives the auth metrics.
	Registerer prometheus.Registerer
	// Replicas, when set, take the key look-ups they may serve.
	Replicas *pg.Replicas
}

// New builds the Authenticator s describes: API keys from the database
// behind a KeyCache kept in step with the table by KeyEvents (listening
// until ctx ends), bearer tokens with the HS256 secret and/or a JWKS
// (loaded now, and refreshed until ctx ends).
func New(ctx context.Context, s Settings, d Deps) (*Authenticator, error) {
	for _, sc := range s.AnonymousScopes {
		if !slices.Contains(AllScopes, sc) {
			return nil, fmt.Errorf("AUTH_ANONYMOUS_SCOPES: unknown scope %q (known: %v, or none)", sc, AllScopes)
		}
		if sc == ScopeAdmin {
			return nil, fmt.Errorf("AUTH_ANONYMOUS_SCOPES: %s cannot be granted to callers without credentials", ScopeAdmin)
		}
	}
	var jwks *JWKS
	switch {
	case s.JWKSURL != "":
		jwks = NewJWKSURL(s.JWKSURL, nil, s.JWKSRefresh, d.Log)
	case s.JWKSFile != "":
		jwks = NewJWKSFile(s.JWKSFile, s.JWKSRefresh, d.Log)
	}
	if jwks != nil {
		if err := jwks.Start(ctx); err != nil {
			return nil, err
		}
	}
	tokens, err := NewTokenVerifier(TokenOptions{
		HS256Secret: []byte(s.JWTSecret),
		JWKS:        jwks,
		Issuers:     s.Issuers,
		Audiences:   s.Audiences,
		Leeway:      s.Leeway,
		Algorithms:  s.Algorithms,
		RoleClaim:   s.RoleClaim,
	})
	if err != nil {
		return nil, err
	}
	var (
		keys   KeyVerifier
		cache  *KeyCache
		events *KeyEvents
	)
	var onReplicas *replicaLookup
	if d.DB != nil {
		var lookup KeyLookup = NewStore(d.DB)
		if d.Replicas != nil {
			onReplicas = newReplicaLookup(d.DB, d.Replicas)
			lookup = onReplicas
		}
		cache = NewKeyCache(lookup, s.KeyCacheTTL, s.KeyCacheSize)
		keys = cache
		events = NewKeyEvents(d.DB, cache, d.Log, d.Registerer)
		if onReplicas != nil {
			events.before = onReplicas.changed
		}
		go events.Run(ctx)
	}
	a := NewAuthenticator(Options{
		AnonymousScopes: s.AnonymousScopes,
		Keys:            keys,
		Tokens:          tokens,
		Timeout:         s.LookupTimeout,
		Registerer:      d.Registerer,
	})
	a.cache, a.events, a.onReplicas = cache, events, onReplicas
	return a, nil
}

// Forget makes this process drop what it cached of key id at once, as a
// notification from the database would; a replica that changed a key
// calls it before answering, so that the change holds there even while
// its listener is down.
func (a *Authenticator) Forget(id string) {
	if a.onReplicas != nil {
		a.onReplicas.changed(context.Background())
	}
	if a.cache != nil {
		a.cache.Forget(id)
	}
}

// KeyEvents returns the listener New started, or nil without a database.
func (a *Authenticator) KeyEvents() *KeyEvents { return a.events }
