package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/golang-jwt/jwt/v5"
)

// Algorithms geogate can verify.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
	AlgEdDSA = "EdDSA"
)

// TokenOptions configure a TokenVerifier.
type TokenOptions struct {
	// HS256Secret enables HS256 tokens signed with it.
	HS256Secret []byte
	// JWKS enables RS256, ES256 and EdDSA tokens signed by its keys.
	JWKS *JWKS
	// Issuers, when not empty, lists the accepted iss values. With more
	// than one, subjects are qualified by issuer.
	Issuers []string
	// Audiences, when not empty, lists accepted aud values; the token must
	// name at least one.
	Audiences []string
	// Leeway is the clock skew allowed on exp, nbf and iat.
	Leeway time.Duration
	// Algorithms is the allow-list; empty means every algorithm a
	// configured key can verify.
	Algorithms []string
	// RoleClaim names the claim that gives the database role a token's
	// requests run as on layers that run as their caller; "" is
	// DefaultRoleClaim.
	RoleClaim string
	// Now replaces the clock in tests.
	Now func() time.Time
}

// TokenVerifier verifies bearer JWTs: signature with an allow-listed
// algorithm and a key of the matching kind, then exp (required), nbf and
// iat with leeway, iss and aud when configured, and a non-empty sub.
type TokenVerifier struct {
	o      TokenOptions
	parser *jwt.Parser

	// scopes remembers parsed geo_scope claims: one caller sends the same
	// claim with every request, and a polygon is worth parsing once.
	mu     sync.Mutex
	scopes map[string]*spatial.Scope
}

// maxParsedScopes bounds TokenVerifier.scopes.
const maxParsedScopes = 1024

// spatialScope parses a geo_scope claim, remembering the result.
func (v *TokenVerifier) spatialScope(raw []byte) (*spatial.Scope, error) {
	v.mu.Lock()
	s, ok := v.scopes[string(raw)]
	v.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := spatial.Parse(raw)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.scopes == nil || len(v.scopes) >= maxParsedScopes {
		v.scopes = make(map[string]*spatial.Scope)
	}
	v.scopes[string(raw)] = s
	return s, nil
}

// NewTokenVerifier returns a verifier for o, or nil and no error when o
// enables no algorithm at all (then bearer tokens are refused).
func NewTokenVerifier(o TokenOptions) (*TokenVerifier, error) {
	var usable []string
	if len(o.HS256Secret) > 0 {
		usable = append(usable, AlgHS256)
	}
	if o.JWKS != nil {
		usable = append(usable, AlgRS256, AlgES256, AlgEdDSA)
	}
	algs := o.Algorithms
	if len(algs) == 0 {
		algs = usable
	}
	for _, a := range algs {
		if !slices.Contains(usable, a) {
			return nil, fmt.Errorf("JWT algorithm %s is allowed but no key for it is configured", a)
		}
	}
	if len(algs) == 0 {
		return nil, nil
	}
	o.Algorithms = algs
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithLeeway(o.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	}
	if len(o.Audiences) > 0 {
		opts = append(opts, jwt.WithAudience(o.Audiences...))
	}
	if o.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(o.Now))
	}
	return &TokenVerifier{o: o, parser: jwt.NewParser(opts...)}, nil
}

// claims are the JWT claims geogate reads. The scope claims are raw so
// that an unexpected shape is reported as a claim error, after the
// signature has been checked.
type claims struct {
	jwt.RegisteredClaims
	Scope    json.RawMessage `json:"scope,omitempty"`
	Scopes   json.RawMessage `json:"scopes,omitempty"`
	GeoScope json.RawMessage `json:"geo_scope,omitempty"`
	Tier     json.RawMessage `json:"tier,omitempty"`
	Layers   json.RawMessage `json:"layers,omitempty"`
}

// Verify checks tok and returns the identity it carries. Every failure is
// an Unauthenticated error whose message says which check failed, never
// why in cryptographic detail.
func (v *TokenVerifier) Verify(tok string) (Identity, error) {
	var c claims
	_, err := v.parser.ParseWithClaims(tok, &c, v.key)
	if err != nil {
		return Identity{}, tokenError(err)
	}
	if len(v.o.Issuers) > 0 && !slices.Contains(v.o.Issuers, c.Issuer) {
		return Identity{}, errTokenIssuer
	}
	if c.Subject == "" || len(c.Subject) > 256 {
		return Identity{}, errTokenClaims
	}
	id := Identity{Kind: KindSub, ID: c.Subject}
	if len(v.o.Issuers) > 1 {
		id.ID = c.Issuer + "|" + c.Subject
	}
	if id.Scopes, err = tokenScopes(c.Scope, c.Scopes); err != nil {
		return Identity{}, err
	}
	if len(c.Tier) > 0 && string(c.Tier) != "null" {
		if err := json.Unmarshal(c.Tier, &id.Tier); err != nil || len(id.Tier) > 64 {
			return Identity{}, errTokenClaims
		}
	}
	if len(c.GeoScope) > 0 {
		s, err := v.spatialScope(c.GeoScope)
		if err != nil {
			return Identity{}, geoScopeError(err)
		}
		id.Spatial = s
	}
	if id.Layers, err = tokenLayers(c.Layers); err != nil {
		return Identity{}, err
	}
	id.Claims = tokenClaims(tok)
	if id.DBRole, err = v.role(id.Claims); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// role reads the role claim of a token's claims: absent or null is none,
// anything but a role name refuses the token.
func (v *TokenVerifier) role(claims string) (string, error) {
	name := v.o.RoleClaim
	if name == "" {
		name = DefaultRoleClaim
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(claims), &m); err != nil {
		return "", errTokenClaims
	}
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var r string
	if err := json.Unmarshal(raw, &r); err != nil || !ValidRole(r) {
		return "", errTokenClaims
	}
	return r, nil
}

// errTokenLayers is the cause of every refusal of a layers claim; the
// message of each says what is wrong with the claim.
var errTokenLayers = errors.New("malformed layers claim")

// tokenLayers reads the "layers" claim: absent or null is every layer,
// otherwise an array of 1 to MaxLayers distinct layer ids or patterns.
// Anything else refuses the token rather than guess: a claim meant to
// narrow what a token reads must never widen it by being misread.
func tokenLayers(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var layers []string
	problem := "it must be an array of strings"
	if err := json.Unmarshal(raw, &layers); err == nil && layers != nil {
		// The entry at fault is not named: a detail is no place to echo
		// a token's content.
		var at int
		if problem, at = checkLayers(layers); at >= 0 {
			problem = "an entry " + problem
		}
	}
	if problem != "" {
		return nil, apperr.Wrap(apperr.Unauthenticated, "The bearer token has a malformed layers claim: "+problem+".", errTokenLayers)
	}
	return layers, nil
}

// tokenScopes reads "scope" (space-separated string, the OAuth form) and
// "scopes" (an array, or a space-separated string), merged.
func tokenScopes(raws ...json.RawMessage) ([]string, error) {
	var out []string
	for _, raw := range raws {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			out = append(out, strings.Fields(s)...)
			continue
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, errTokenClaims
		}
		out = append(out, list...)
	}
	if len(out) > 64 {
		return nil, errTokenClaims
	}
	return out, nil
}

// key picks the verification key for t: the HS256 secret only for HS256,
// and only JWKS keys of the matching kind for the others, so an HS256
// token can never be checked against a public key.
func (v *TokenVerifier) key(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !slices.Contains(v.o.Algorithms, alg) {
		return nil, errors.New("algorithm not allowed")
	}
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 4.1.11: extensions we do not implement must fail.
		return nil, errors.New("critical header extensions are not supported")
	}
	if alg == AlgHS256 {
		if len(v.o.HS256Secret) == 0 {
			return nil, errors.New("no HS256 secret")
		}
		return v.o.HS256Secret, nil
	}
	if v.o.JWKS == nil {
		return nil, errors.New("no key set")
	}
	kid, _ := t.Header["kid"].(string)
	keys := v.o.JWKS.Keys(kid, alg)
	switch len(keys) {
	case 0:
		return nil, errors.New("unknown key")
	case 1:
		return keys[0], nil
	}
	set := jwt.VerificationKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// keyFits reports whether a public key can verify alg.
func keyFits(k any, alg string) bool {
	switch k := k.(type) {
	case *rsa.PublicKey:
		return alg == AlgRS256
	case *ecdsa.PublicKey:
		return alg == AlgES256 && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == AlgEdDSA
	}
	return false
}

func tokenError(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errInvalidToken
	case errors.Is(err, jwt.ErrTokenExpired):
		return errExpiredToken
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errEarlyToken
	case errors.Is(err, jwt.ErrTokenInvalidAudience), strings.Contains(err.Error(), "aud claim is required"):
		return errTokenAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errTokenIssuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidClaims), errors.Is(err, jwt.ErrInvalidType):
		return errTokenClaims
	}
	return errInvalidToken
}

// MintOptions describe a development token.
type MintOptions struct {
	Subject  string
	Scopes   []string
	Tier     string
	Spatial  *spatial.Scope
	Layers   []string
	TTL      time.Duration
	Issuer   string
	Audience []string
	Now      time.Time
	// Claims are more claims to sign (a role, a tenant); they do not
	// replace those above.
	Claims map[string]any
}

// MintHS256 signs a token for o with secret. It is meant for development
// and tests; production tokens come from an identity provider.
func MintHS256(secret []byte, o MintOptions) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("no HS256 secret configured (JWT_HS256_SECRET)")
	}
	if o.Subject == "" {
		return "", errors.New("a subject is required")
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	m := jwt.MapClaims{}
	for k, v := range o.Claims {
		m[k] = v
	}
	for k, v := range (jwt.MapClaims{
		"sub": o.Subject,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(o.TTL).Unix(),
	}) {
		m[k] = v
	}
	if len(o.Scopes) > 0 {
		m["scope"] = strings.Join(o.Scopes, " ")
	}
	if o.Tier != "" {
		m["tier"] = o.Tier
	}
	if o.Spatial != nil {
		m["geo_scope"] = o.Spatial // its canonical JSON
	}
	if err := ValidateLayers(o.Layers); err != nil {
		return "", err
	}
	if o.Layers != nil {
		m["layers"] = o.Layers
	}
	if o.Issuer != "" {
		m["iss"] = o.Issuer
	}
	if len(o.Audience) > 0 {
		m["aud"] = o.Audience
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, m).SignedString(secret)
}

// geoScopeError refuses a token whose geo_scope claim Parse refused,
// naming the fault when Parse names one (a hole outside its shell, say),
// so the issuer can see what to fix.
func geoScopeError(err error) error {
	r := spatial.Reason(err)
	if r == "" {
		return errTokenGeoScope
	}
	return apperr.Wrap(apperr.Unauthenticated, "The bearer token has an invalid geo_scope claim: "+r+".", errTokenGeoScope)
}
