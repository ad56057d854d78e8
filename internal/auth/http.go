package auth

import (
	"context"
	"errors"
	"net/http"

	"github.com/geogate/geogate/internal/apperr"
)

// Challenge is the WWW-Authenticate value of every 401: either credential
// works.
const Challenge = `Bearer realm="geogate", ApiKey realm="geogate", header="x-api-key"`

// Admit authenticates r and returns its context with the Identity in it,
// where FromContext finds it. Invalid credentials are a 401 error
// carrying its WWW-Authenticate fields; an unreachable key store a 503.
// Missing credentials are not an error here: routes that need more than
// the anonymous scopes say so with Allow.
func (a *Authenticator) Admit(r *http.Request) (context.Context, error) {
	id, err := a.Authenticate(r.Context(), r)
	a.count(r, err)
	if err != nil {
		return nil, withChallenge(r, err)
	}
	return WithIdentity(r.Context(), id), nil
}

// Allow returns nil when the identity of ctx holds scope. A caller
// without credentials (whose anonymous scopes do not include it) gets a
// 401 with WWW-Authenticate; an authenticated caller without the scope a
// 403 saying which scope it lacks.
func Allow(ctx context.Context, r *http.Request, scope string) error {
	id := FromContext(ctx)
	if id.Has(scope) {
		return nil
	}
	if id.Anonymous || id.Kind == "" {
		return withChallenge(r, ErrUnauthenticated)
	}
	e := apperr.Errorf(apperr.Forbidden, "Your credentials do not grant the %s scope this route needs.", scope)
	e.Header = http.Header{"Www-Authenticate": {`Bearer realm="geogate", error="insufficient_scope", scope="` + scope + `"`}}
	return e
}

// tokenErrors are the refusals of a bearer token (RFC 6750 invalid_token).
var tokenErrors = []error{errInvalidToken, errExpiredToken, errEarlyToken, errTokenIssuer, errTokenAudience, errTokenClaims, errTokenGeoScope, errTokenLayers}

// withChallenge is err, and for a 401 the WWW-Authenticate fields that
// tell the client which credentials would do.
func withChallenge(r *http.Request, err error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Kind != apperr.Unauthenticated {
		return err
	}
	h := http.Header{}
	// Basic goes in a field of its own, first: browsers read one
	// challenge per field and would not find it behind Bearer's
	// parameters.
	if offersBasic(r) {
		h.Add("WWW-Authenticate", BasicChallenge)
	}
	v := Challenge
	for _, te := range tokenErrors {
		if errors.Is(err, te) {
			v = `Bearer realm="geogate", error="invalid_token", ApiKey realm="geogate", header="x-api-key"`
		}
	}
	h.Add("WWW-Authenticate", v)
	out := *ae
	out.Header = h
	return &out
}
