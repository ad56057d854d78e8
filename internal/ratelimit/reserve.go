package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/geogate/geogate/internal/apperr"
)

// Reserve decides one request as a whole: when r's policy caps
// concurrency it first takes an in-flight slot, so that a request refused
// for concurrency spends none of the rate budget; then it decides r. It
// returns, for an admitted request, a release to call once the request
// has been answered (more calls do nothing) and the decision, whose
// Header the answer carries and which Settle takes to charge the
// request's true cost. A refusal is an error: a RateLimited *apperr.Error
// (429) carrying the RateLimit fields and Retry-After in its Header, or
// the error Check returns (an unknown policy, Redis unavailable under a
// fail-closed policy, the context's own).
func (l *Limiter) Reserve(ctx context.Context, r Request) (release func(), d Decision, err error) {
	release, ok, err := l.acquire(ctx, r.Policy, r.Identity)
	if err != nil {
		return nil, Decision{}, err
	}
	if !ok {
		return nil, Decision{}, l.concurrencyRefusal(ctx, r)
	}
	d, err = l.Check(ctx, r)
	if err != nil {
		release()
		return nil, Decision{}, err
	}
	if !d.Allowed {
		release()
		return nil, Decision{}, d.Refusal()
	}
	return release, d, nil
}

// concurrencyRefusal is the 429 of a request refused an in-flight slot:
// refused before any window was charged, its fields tell what the
// windows hold, read without spending.
func (l *Limiter) concurrencyRefusal(ctx context.Context, r Request) error {
	e := apperr.Limited("Too many requests in flight at once.", r.Policy+"-concurrency")
	e.Header = http.Header{}
	// acquire found the policy; a SetPolicies since cannot remove it.
	p, _ := l.policy(r.Policy)
	if d, err := l.read(ctx, p, Request{Policy: r.Policy, Identity: r.Identity, Tier: r.Tier}); err == nil {
		d.writeHeader(e.Header)
	}
	e.Header.Set("Retry-After", "1")
	return e
}

// Header is the RateLimit fields for d: the IETF draft's RateLimit-Policy
// and RateLimit lists (one item per window), the older RateLimit-Limit,
// -Remaining and -Reset of the window closest to exhaustion, and
// Retry-After when d is a rejection that can succeed later. Reset values
// are whole seconds, rounded up. A decision with no windows (failed
// open) has none.
func (d Decision) Header() http.Header {
	h := http.Header{}
	d.writeHeader(h)
	return h
}

func (d Decision) writeHeader(h http.Header) {
	t, ok := d.tightest()
	if !ok {
		return
	}
	// The keys are set as http.Header.Set would canonicalize them, without
	// its work: every answer carries these fields.
	h["Ratelimit-Policy"] = []string{d.PolicyField()}
	h["Ratelimit"] = []string{d.RemainingField()}
	h["Ratelimit-Limit"] = []string{strconv.Itoa(t.Limit)}
	h["Ratelimit-Remaining"] = []string{strconv.Itoa(t.Remaining)}
	h["Ratelimit-Reset"] = []string{secs(t.Reset)}
	if d.Limited && !d.Allowed && !d.Impossible {
		h["Retry-After"] = []string{strconv.FormatInt(d.RetryAfterSeconds(), 10)}
	}
}

// PolicyField is the RateLimit-Policy field of d's windows: "name";q=
// limit;w=seconds, one item a window.
func (d Decision) PolicyField() string {
	return d.field("q", func(w WindowState) int { return w.Limit }, "w", func(w WindowState) time.Duration { return w.Period })
}

// RemainingField is the RateLimit field of d's windows: "name";r=
// remaining;t=seconds to reset, one item a window.
func (d Decision) RemainingField() string {
	return d.field("r", func(w WindowState) int { return w.Remaining }, "t", func(w WindowState) time.Duration { return w.Reset })
}

// field is one item a window: its quoted name, then a=count and
// b=seconds, rounded up.
func (d Decision) field(a string, count func(WindowState) int, b string, dur func(WindowState) time.Duration) string {
	buf := make([]byte, 0, 48*len(d.Windows))
	for i, w := range d.Windows {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendQuote(buf, w.Name)
		buf = append(append(append(buf, ';'), a...), '=')
		buf = strconv.AppendInt(buf, int64(count(w)), 10)
		buf = append(append(append(buf, ';'), b...), '=')
		buf = strconv.AppendInt(buf, ceilSeconds(dur(w)), 10)
	}
	return string(buf)
}

// Refusal is the error a refused request ends with: a 429 naming the
// windows that refused it, carrying d's fields, which says so when no
// wait can help.
func (d Decision) Refusal() error {
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
	e := apperr.Limited(msg, d.Violated()...)
	e.Header = d.Header()
	if !d.Impossible {
		e.RetryAfter = d.RetryAfter
	}
	return e
}
