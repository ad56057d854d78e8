package auth

import (
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
)

// Challenge is the WWW-Authenticate value of every 401: either credential
// works.
const Challenge = `Bearer realm="geogate", ApiKey realm="geogate", header="x-api-key"`

// Middleware authenticates every request and stores its Identity in the
// request's context, where FromContext finds it. Invalid credentials end
// the request with 401 (and WWW-Authenticate); an unreachable key store
// with 503. Missing credentials are not an error here: routes that need
// more than the anonymous scopes say so with Require.
func (a *Authenticator) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := a.Authenticate(c.Request.Context(), c.Request)
		a.count(c.Request, err)
		if err != nil {
			abortAuth(c, err)
			return
		}
		c.Request = c.Request.WithContext(WithIdentity(c.Request.Context(), id))
		httpx.AddLogAttrs(c, "identity", id.LimitKey())
		c.Next()
	}
}

// Require lets the request through when its identity holds scope. A caller
// without credentials (whose anonymous scopes do not include it) gets 401
// with WWW-Authenticate; an authenticated caller without the scope gets
// 403.
func Require(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := FromContext(c.Request.Context())
		if id.Has(scope) {
			c.Next()
			return
		}
		if id.Anonymous || id.Kind == "" {
			abortAuth(c, ErrUnauthenticated)
			return
		}
		c.Header("WWW-Authenticate", `Bearer realm="geogate", error="insufficient_scope", scope="`+scope+`"`)
		httpx.Abort(c, apperr.Errorf(apperr.Forbidden, "Your credentials do not grant the %s scope this route needs.", scope))
	}
}

// tokenErrors are the refusals of a bearer token (RFC 6750 invalid_token).
var tokenErrors = []error{errInvalidToken, errExpiredToken, errEarlyToken, errTokenIssuer, errTokenAudience, errTokenClaims, errTokenGeoScope, errTokenLayers}

func abortAuth(c *gin.Context, err error) {
	if apperr.KindOf(err) == apperr.Unauthenticated {
		h := c.Writer.Header()
		// Basic goes in a field of its own, first: browsers read one
		// challenge per field and would not find it behind Bearer's
		// parameters.
		if offersBasic(c.Request) {
			h.Add("WWW-Authenticate", BasicChallenge)
		}
		v := Challenge
		for _, te := range tokenErrors {
			if errors.Is(err, te) {
				v = `Bearer realm="geogate", error="invalid_token", ApiKey realm="geogate", header="x-api-key"`
			}
		}
		h.Add("WWW-Authenticate", v)
	}
	httpx.Abort(c, err)
}
