package ratelimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
)

// MiddlewareOption adjusts Middleware.
type MiddlewareOption func(*middleware)

// WithTier selects per-tier overrides by the tier name tier returns.
func WithTier(tier func(*gin.Context) string) MiddlewareOption {
	return func(m *middleware) { m.tier = tier }
}

type middleware struct {
	tier func(*gin.Context) string
}

// Middleware limits a route by policy, like a FastAPI dependency. identity
// names who is limited: the name becomes part of a Redis key, so it must
// never be a credential (auth.LimitKey gives "key:<key id>", never the
// secret). A request it names "" is limited by its connection's address
// ("ip:<address>"), never by a header a client could invent. cost prices
// the request (nil: 1). Every response it lets through carries the
// RateLimit headers; a request over the limit ends with 429, one that Redis
// cannot decide under a fail-closed policy with 503. When the policy caps
// concurrency, the request also holds an in-flight slot until the handler
// returns. It panics when policy is not configured or identity is nil:
// routes are wired at start-up.
func (l *Limiter) Middleware(policy string, identity func(*gin.Context) string, cost func(*gin.Context) int, opts ...MiddlewareOption) gin.HandlerFunc {
	if _, ok := l.policies[policy]; !ok {
		panic(fmt.Sprintf("ratelimit: Middleware: unknown policy %q", policy))
	}
	if identity == nil {
		panic(fmt.Sprintf("ratelimit: Middleware: policy %q: nil identity", policy))
	}
	var m middleware
	for _, o := range opts {
		o(&m)
	}
	return func(c *gin.Context) {
		r := Request{Policy: policy, Identity: identity(c), Cost: 1}
		if cost != nil {
			r.Cost = cost(c)
		}
		if m.tier != nil {
			r.Tier = m.tier(c)
		}
		release, ok := l.Admit(c, r)
		if !ok {
			return
		}
		defer release()
		c.Next()
	}
}

// Admit decides r for the request c as Middleware does, for handlers that
// charge only some requests. When r's policy caps concurrency it first
// takes an in-flight slot, so a request refused for concurrency (429 naming
// "<policy>-concurrency") spends none of the rate budget; then it checks r
// and writes the RateLimit headers. It returns ok when the request may
// proceed, with a release to call once the request has been answered (more
// calls do nothing); otherwise the answer (429, or the error's status) is
// written and release is nil. An empty r.Identity is the connection's
// address ("ip:<address>").
func (l *Limiter) Admit(c *gin.Context, r Request) (release func(), ok bool) {
	if r.Identity == "" {
		r.Identity = "ip:" + c.RemoteIP()
	}
	release, ok, err := l.Acquire(c.Request.Context(), r.Policy, r.Identity)
	if err != nil {
		httpx.Abort(c, err)
		return nil, false
	}
	if !ok {
		c.Header("Retry-After", "1")
		writeProblem(c, Problem{
			Detail:           "Too many requests in flight at once.",
			ViolatedPolicies: []string{r.Policy + "-concurrency"},
		})
		return nil, false
	}
	d, err := l.Check(c.Request.Context(), r)
	if err != nil {
		release()
		httpx.Abort(c, err)
		return nil, false
	}
	if !Respond(c, d) {
		release()
		return nil, false
	}
	return release, true
}

// Respond writes d's headers and, when d does not allow the request, ends
// it with 429. It reports whether the request may proceed. Handlers that
// call Check themselves finish with it; Admit does both, and also applies
// the policy's concurrency cap.
func Respond(c *gin.Context, d Decision) bool {
	WriteHeaders(c.Writer.Header(), d)
	if d.Allowed {
		return true
	}
	Reject(c, d)
	return false
}

// WriteHeaders sets the rate-limit fields for d: the IETF draft's
// RateLimit-Policy and RateLimit lists (one item per window), the older
// RateLimit-Limit, -Remaining and -Reset of the window closest to
// exhaustion, and Retry-After when d is a rejection that can succeed later.
// Reset values are whole seconds, rounded up.
func WriteHeaders(h http.Header, d Decision) {
	t, ok := d.tightest()
	if !ok {
		return
	}
	pol := make([]string, len(d.Windows))
	cur := make([]string, len(d.Windows))
	for i, w := range d.Windows {
		name := strconv.Quote(w.Name)
		pol[i] = name + ";q=" + strconv.Itoa(w.Limit) + ";w=" + secs(w.Period)
		cur[i] = name + ";r=" + strconv.Itoa(w.Remaining) + ";t=" + secs(w.Reset)
	}
	h.Set("RateLimit-Policy", strings.Join(pol, ", "))
	h.Set("RateLimit", strings.Join(cur, ", "))
	h.Set("RateLimit-Limit", strconv.Itoa(t.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(t.Remaining))
	h.Set("RateLimit-Reset", secs(t.Reset))
	if d.Limited && !d.Allowed && !d.Impossible {
		h.Set("Retry-After", strconv.FormatInt(d.RetryAfterSeconds(), 10))
	}
}

// Problem is the 429 body: an RFC 9457 problem document whose detail also
// gives it FastAPI's {"detail": ...} shape.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// Reject ends the request with 429 and the problem document for d.
func Reject(c *gin.Context, d Decision) {
	p := Problem{Detail: "Rate limit exceeded.", ViolatedPolicies: d.Violated()}
	if d.Impossible {
		for _, w := range d.Windows {
			if d.Cost > w.Limit {
				p.Detail = fmt.Sprintf("Rate limit exceeded: this request costs %d units but policy %q allows at most %d per %s, so it can never be admitted; make it cheaper.",
					d.Cost, w.Name, w.Limit, formatPeriod(w.Period))
				break
			}
		}
	}
	writeProblem(c, p)
}

func writeProblem(c *gin.Context, p Problem) {
	p.Type = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	p.Title = "Too Many Requests"
	p.Status = http.StatusTooManyRequests
	body, _ := json.Marshal(p)
	c.Abort()
	c.Data(http.StatusTooManyRequests, "application/problem+json", body)
}

// RadiusCostFrom prices a request by RadiusCost of its query parameter
// param, in meters; a missing or malformed value costs 1 (the handler's
// validation answers it).
func RadiusCostFrom(param string) func(*gin.Context) int {
	return func(c *gin.Context) int {
		v, err := strconv.ParseFloat(c.Query(param), 64)
		if err != nil {
			return 1
		}
		return RadiusCost(v)
	}
}
