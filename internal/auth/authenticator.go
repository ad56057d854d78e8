package auth

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/peer"
)

// Authenticator turns a request's credentials into an Identity.
type Authenticator struct {
	anonScopes []string
	keys       KeyVerifier
	tokens     *TokenVerifier
	timeout    time.Duration
	outcomes   *prometheus.CounterVec
	// cache and events are the key cache and its listener New built; nil
	// for an Authenticator made with NewAuthenticator.
	cache *KeyCache
	// onReplicas, when keys are looked up on replicas, must hear of every
	// change before the cache forgets it.
	onReplicas *replicaLookup
	events     *KeyEvents
}

// KeyVerifier finds the API key a secret belongs to. It returns an
// Unauthenticated error for unknown, revoked or expired keys and an
// Unavailable one when it cannot tell.
type KeyVerifier interface {
	Verify(ctx context.Context, secret string) (Key, error)
}

// Options configure an Authenticator.
type Options struct {
	// AnonymousScopes are granted to requests without credentials.
	AnonymousScopes []string
	// Keys verifies API keys; nil rejects every API key.
	Keys KeyVerifier
	// Tokens verifies bearer tokens; nil rejects every token.
	Tokens *TokenVerifier
	// Timeout bounds one verification (a database lookup on a cache miss).
	Timeout time.Duration
	// Registerer, if set, receives geogate_auth_requests_total{method,result}.
	Registerer prometheus.Registerer
}

// NewAuthenticator returns an Authenticator with options o.
func NewAuthenticator(o Options) *Authenticator {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	a := &Authenticator{anonScopes: o.AnonymousScopes, keys: o.Keys, tokens: o.Tokens, timeout: o.Timeout}
	if o.Registerer != nil {
		a.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geogate_auth_requests_total",
			Help: "Requests by credential presented (key, basic, bearer, anonymous, both) and result (ok, rejected, unavailable).",
		}, []string{"method", "result"})
		o.Registerer.MustRegister(a.outcomes)
	}
	return a
}

// count records the outcome of authenticating r.
func (a *Authenticator) count(r *http.Request, err error) {
	if a.outcomes == nil {
		return
	}
	_, key := r.Header["X-Api-Key"]
	authz, bearer := r.Header["Authorization"]
	method := "anonymous"
	switch {
	case key && bearer:
		method = "both"
	case key:
		method = "key"
	case bearer && isBasic(authz[0]):
		method = "basic"
	case bearer:
		method = "bearer"
	}
	result := "ok"
	switch {
	case err == nil:
	case apperr.KindOf(err) == apperr.Unauthenticated, apperr.KindOf(err) == apperr.Forbidden:
		result = "rejected"
	default:
		result = "unavailable"
	}
	a.outcomes.WithLabelValues(method, result).Inc()
}

// Authenticate returns the identity of r. An API key comes in an
// x-api-key header or as HTTP Basic credentials (key id and secret), a
// token as "Authorization: Bearer". A request with neither an
// x-api-key header nor an Authorization header is anonymous and known by
// its client address (peer.Of). A request with both is refused rather than guessing
// which one the caller meant (and which one its limit should count).
// Credentials that are present but wrong are refused even on routes that
// anonymous callers may use, so that a broken client notices.
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (Identity, error) {
	keys := r.Header.Values("X-Api-Key")
	authz := r.Header.Values("Authorization")
	switch {
	case len(keys) > 0 && len(authz) > 0:
		return Identity{}, errBothCredentials
	case len(keys) > 0:
		if len(keys) > 1 {
			return Identity{}, errMalformedKey
		}
		return a.authenticateKey(ctx, keys[0])
	case len(authz) > 0:
		if len(authz) > 1 {
			return Identity{}, errMalformedAuthz
		}
		if isBasic(authz[0]) {
			return a.authenticateBasic(ctx, authz[0])
		}
		tok, err := BearerToken(authz[0])
		if err != nil {
			return Identity{}, err
		}
		if a.tokens == nil {
			return Identity{}, errNoTokens
		}
		return a.tokens.Verify(tok)
	}
	return Identity{
		Kind:      KindIP,
		ID:        IPKey(peer.Of(r).Addr),
		Scopes:    slices.Clip(a.anonScopes),
		Anonymous: true,
	}, nil
}

func (a *Authenticator) authenticateKey(ctx context.Context, secret string) (Identity, error) {
	if err := checkKeyHeader(secret); err != nil {
		return Identity{}, err
	}
	if a.keys == nil {
		return Identity{}, errInvalidKey
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	k, err := a.keys.Verify(ctx, secret)
	if err != nil {
		return Identity{}, err
	}
	// Clipped, so that a caller appending to them cannot write into the
	// cached key.
	return Identity{Kind: KindKey, ID: k.ID, Scopes: slices.Clip(k.Scopes), Tier: k.Tier, Account: k.Account, Spatial: k.Spatial, Layers: slices.Clip(k.Layers),
		DBRole: k.DBRole, KeyClaims: k.DBClaims, Claims: k.claims}, nil
}

// MaxKeyLength bounds the x-api-key header.
const MaxKeyLength = 256

// checkKeyHeader rejects API key headers that no key could have: empty,
// overlong or with bytes outside printable ASCII.
func checkKeyHeader(s string) error {
	if s == "" || len(s) > MaxKeyLength {
		return errMalformedKey
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return errMalformedKey
		}
	}
	return nil
}

// MaxTokenLength bounds a bearer token.
const MaxTokenLength = 8 << 10

// BearerToken extracts the token from an Authorization header value
// "Bearer <token>" (the scheme is case-insensitive). The token must look
// like a compact JWS: three base64url parts separated by dots.
func BearerToken(h string) (string, error) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errMalformedAuthz
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || len(tok) > MaxTokenLength {
		return "", errMalformedAuthz
	}
	dots := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '.':
			dots++
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return "", errInvalidToken
		}
	}
	if dots != 2 {
		return "", errInvalidToken
	}
	return tok, nil
}
