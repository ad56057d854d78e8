package httpx

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
)

const queryKey = "httpx.query"

// Query is the request's query string, parsed once per request however
// many steps (a cost function, a layer check, the handler) read it. The
// values are shared: read them, copy them to change them. Behind
// CheckQuery, which every router of NewRouter has, the query is known to
// be well formed.
func Query(c *gin.Context) url.Values {
	if v, ok := c.Get(queryKey); ok {
		return v.(url.Values)
	}
	v := c.Request.URL.Query()
	c.Set(queryKey, v)
	return v
}

// CheckQuery parses the request's query string for Query and answers 400
// when it is malformed. Go's parser skips a pair holding a ';' or a bad
// %-escape and carries on, so sortby=name;drop would be served in the
// default order as if nothing had been asked: a client must hear that its
// parameter was not read.
func CheckQuery() gin.HandlerFunc {
	return func(c *gin.Context) {
		v, err := ParseQuery(c.Request.URL.RawQuery)
		if err != nil {
			Abort(c, err)
			return
		}
		c.Set(queryKey, v)
		c.Next()
	}
}

// maxQuoted bounds how much of a bad pair an error quotes back.
const maxQuoted = 64

// ParseQuery parses a raw query string as url.ParseQuery does, but fails
// on the first pair it would skip: one holding a ';' (a separator Go no
// longer accepts) or an invalid %-escape. The error is an
// apperr.BadRequest naming the pair.
func ParseQuery(raw string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err == nil {
		return v, nil
	}
	for _, pair := range strings.Split(raw, "&") {
		if strings.Contains(pair, ";") {
			return nil, apperr.New(apperr.BadRequest, fmt.Sprintf(
				"The query parameter %s contains a ';': separate parameters with '&', and write a ';' within a value as %%3B.", quote(pair)))
		}
		key, value, _ := strings.Cut(pair, "=")
		if _, err := url.QueryUnescape(key); err != nil {
			return nil, badEscape(pair)
		}
		if _, err := url.QueryUnescape(value); err != nil {
			return nil, badEscape(pair)
		}
	}
	return nil, apperr.Wrap(apperr.BadRequest, "The query string is malformed.", err)
}

func badEscape(pair string) error {
	return apperr.New(apperr.BadRequest, fmt.Sprintf(
		"The query parameter %s has an invalid %%-escape: a '%%' must be followed by two hexadecimal digits (write '%%' itself as %%25).", quote(pair)))
}

// quote names a raw pair for an error message, shortened, the way Go
// quotes a string, so that nothing the client sent is echoed unescaped.
func quote(pair string) string {
	if len(pair) > maxQuoted {
		pair = pair[:maxQuoted] + "..."
	}
	return fmt.Sprintf("%q", pair)
}
