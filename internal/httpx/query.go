package httpx

import (
	"net/url"

	"github.com/gin-gonic/gin"
)

const queryKey = "httpx.query"

// Query is the request's query string, parsed once per request however
// many steps (a cost function, a layer check, the handler) read it. The
// values are shared: read them, copy them to change them.
func Query(c *gin.Context) url.Values {
	if v, ok := c.Get(queryKey); ok {
		return v.(url.Values)
	}
	v := c.Request.URL.Query()
	c.Set(queryKey, v)
	return v
}
