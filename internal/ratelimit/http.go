package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
)

// Caller names who a request is limited as: the identity it is counted
// under and the tier whose overrides apply. The identity becomes part of a
// Redis key as it is, so it must be short, printable and never a
// credential (auth.Identity.LimitKey gives such a name).
type Caller func(r *http.Request) (identity, tier string)

// Middleware limits a route by policy, like a FastAPI dependency: cost
// prices the request (nil: 1) and caller names who is charged. Every
// response it lets through carries the RateLimit headers; a request over
// the limit ends with 429, one that Redis cannot decide under a fail-closed
// policy with 503. When the policy caps concurrency, the request also
// holds an in-flight slot until the handler returns. It panics when policy
// is not configured or caller is nil: routes are wired at start-up.
func (l *Limiter) Middleware(policy string, cost func(*gin.Context) int, caller Caller) gin.HandlerFunc {
	if _, ok := l.policy(policy); !ok {
		panic(fmt.Sprintf("ratelimit: Middleware: unknown policy %q", policy))
	}
	if caller == nil {
		panic(fmt.Sprintf("ratelimit: Middleware: policy %q: nil caller", policy))
	}
	return func(c *gin.Context) {
		n := 1
		if cost != nil {
			n = cost(c)
		}
		release, ok := l.Admit(c, policy, n, caller)
		if !ok {
			return
		}
		defer release()
		c.Next()
	}
}

// Admit decides a request of cost units under policy as Middleware does,
// for handlers that charge only some requests. When the policy caps
// concurrency it first takes an in-flight slot, so a request refused for
// concurrency (429 naming "<policy>-concurrency") spends none of the rate
// budget; then it decides the request and writes the RateLimit headers. It
// returns ok when the request may proceed, with a release to call once the
// request has been answered (more calls do nothing); otherwise the answer
// (429, or the error's status) is written and release is nil.
func (l *Limiter) Admit(c *gin.Context, policy string, cost int, caller Caller) (release func(), ok bool) {
	release, _, ok = l.Reserve(c, policy, cost, caller)
	return release, ok
}

// Reserve is Admit that also returns the decision, which Settle takes to
// charge the request's true cost once it is known.
func (l *Limiter) Reserve(c *gin.Context, policy string, cost int, caller Caller) (release func(), d Decision, ok bool) {
	identity, tier := caller(c.Request)
	ctx := c.Request.Context()
	release, ok, err := l.acquire(ctx, policy, identity)
	if err != nil {
		httpx.Abort(c, err)
		return nil, Decision{}, false
	}
	if !ok {
		// Refused before any window was charged: the headers tell what the
		// windows hold, read without spending.
		// acquire found the policy; a SetPolicies since cannot remove it.
		p, _ := l.policy(policy)
		if d, err := l.read(ctx, p, Request{Policy: policy, Identity: identity, Tier: tier}); err == nil {
			writeHeaders(c.Writer.Header(), d)
		}
		c.Header("Retry-After", "1")
		httpx.Abort(c, apperr.Limited("Too many requests in flight at once.", policy+"-concurrency"))
		return nil, Decision{}, false
	}
	d, err = l.Check(ctx, Request{Policy: policy, Identity: identity, Tier: tier, Cost: cost})
	if err != nil {
		release()
		httpx.Abort(c, err)
		return nil, Decision{}, false
	}
	writeHeaders(c.Writer.Header(), d)
	if !d.Allowed {
		release()
		httpx.Abort(c, d.refusal())
		return nil, Decision{}, false
	}
	return release, d, true
}

// writeHeaders sets the rate-limit fields for d: the IETF draft's
// RateLimit-Policy and RateLimit lists (one item per window), the older
// RateLimit-Limit, -Remaining and -Reset of the window closest to
// exhaustion, and Retry-After when d is a rejection that can succeed later.
// Reset values are whole seconds, rounded up.
func writeHeaders(h http.Header, d Decision) {
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

// refusal is the error a refused request ends with: a 429 naming the
// windows that refused it, which says so when no wait can help.
func (d Decision) refusal() error {
	msg := "Rate limit exceeded."
	if d.Impossible {
		for _, w := range d.Windows {
			if d.Cost > w.Limit {
				msg = fmt.Sprintf("Rate limit exceeded: this request costs %d units but policy %q allows at most %d per %s, so it can never be admitted; make it cheaper.",
					d.Cost, w.Name, w.Limit, w.Window.period())
				break
			}
		}
	}
	return apperr.Limited(msg, d.Violated()...)
}
