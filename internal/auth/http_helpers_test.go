package auth

import (
	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
)

// middleware authenticates the requests of a test router as the
// service's router does with Admit.
func (a *Authenticator) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, err := a.Admit(c.Request)
		if err != nil {
			httpx.Abort(c, err)
			return
		}
		c.Request = c.Request.WithContext(ctx)
		httpx.AddLogAttrs(c, "identity", FromContext(ctx).LimitKey())
		c.Next()
	}
}

// require lets a test route's requests through when Allow does.
func require(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := Allow(c.Request.Context(), c.Request, scope); err != nil {
			httpx.Abort(c, err)
			return
		}
		c.Next()
	}
}
