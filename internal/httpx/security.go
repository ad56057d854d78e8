package httpx

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// APIContentSecurityPolicy suits JSON and tile responses: nothing in them
// may load or run anything. Pages that need more set their own policy.
const APIContentSecurityPolicy = "default-src 'none'; frame-ancestors 'none'"

// SecurityHeaders sets headers that are right for an API and harmless for
// its pages; a page handler may replace Content-Security-Policy.
func SecurityHeaders() gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		for _, f := range securityFields {
			h[f.key] = f.value
		}
		c.Next()
	}
}

// securityFields are SecurityHeaders' fields, keyed as net/http keys
// them. Every response shares the value slices: Header.Set and Add put a
// new slice in place, so none is ever written to.
var securityFields = []struct {
	key   string
	value []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"Cross-Origin-Resource-Policy", []string{"same-site"}},
	{"Content-Security-Policy", []string{APIContentSecurityPolicy}},
}

// CORS allows cross-origin requests from the listed origins only; with no
// origins it adds nothing, so browsers keep the same-origin rule. "*" allows
// any origin (without credentials).
func CORS(origins []string, exposeHeaders []string) gin.HandlerFunc {
	allowed := map[string]bool{}
	any := false
	for _, o := range origins {
		if o == "*" {
			any = true
		}
		allowed[strings.TrimRight(o, "/")] = true
	}
	expose := strings.Join(exposeHeaders, ", ")
	return func(c *gin.Context) {
		origin := c.GetHeader("Origin")
		if origin == "" || (!any && !allowed[origin]) {
			c.Next()
			return
		}
		h := c.Writer.Header()
		h.Add("Vary", "Origin")
		if any {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		if expose != "" {
			h.Set("Access-Control-Expose-Headers", expose)
		}
		if c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-API-Key, X-Request-ID, If-None-Match")
			h.Set("Access-Control-Max-Age", "600")
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		c.Next()
	}
}
