package limits

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/ratelimit"
)

// Quotas serves GET /rate_limit: every rate-limit policy that applies to
// the caller, named by the routes it guards, with what the caller has
// used of each window and what remains, read without spending any of it.
type Quotas struct {
	gate    Gate
	rules   access.Settings
	limiter *ratelimit.Limiter
	// guards lists the routes that spend each policy, in the route
	// table's order; layerRoutes those that read a layer
	// (gate.Spend.Layers), whose own policy, when the layer file gives it
	// one, they spend instead.
	guards      map[string][]string
	layerRoutes []string
}

// Gate is what /rate_limit asks of the service's gate: to admit it.
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
}

// NewQuotas returns the handler of GET /rate_limit over the limiter's
// policies and the layer rules, each request admitted by g.
func NewQuotas(g Gate, rules access.Settings, lim *ratelimit.Limiter) *Quotas {
	return &Quotas{gate: g, rules: rules, limiter: lim, guards: map[string][]string{}}
}

// Guarded tells q which routes spend each policy (guards) and which read
// a layer, whose own policy they may spend instead (layerRoutes), as the
// route table says.
func (q *Quotas) Guarded(guards map[string][]string, layerRoutes []string) {
	q.guards, q.layerRoutes = guards, layerRoutes
}

// The answer of GET /rate_limit, a policy of it, a window and a concurrency cap.
type (
	QuotaAnswer struct {
		Identity string        `json:"identity"`
		Tier     *string       `json:"tier"`
		Policies []PolicyQuota `json:"policies"`
	}
	PolicyQuota struct {
		Policy string `json:"policy"`
		// Unit is what the windows count: requests or db-ms.
		Unit   string   `json:"unit"`
		Routes []string `json:"routes"`
		// Layers are the layers (the caller may read) that spend this
		// policy on the routes that read them.
		Layers      []string          `json:"layers,omitempty"`
		Windows     []WindowQuota     `json:"windows"`
		Concurrency *ConcurrencyQuota `json:"concurrency,omitempty"`
		Shadow      bool              `json:"shadow,omitempty"`
		Counted     string            `json:"counted"`
	}
	WindowQuota struct {
		Name      string     `json:"name"`
		Limit     int        `json:"limit"`
		Window    int64      `json:"window"`
		Calendar  string     `json:"calendar,omitempty"`
		Timezone  string     `json:"timezone,omitempty"`
		Used      int        `json:"used"`
		Remaining int        `json:"remaining"`
		Reset     int64      `json:"reset"`
		ResetsAt  *time.Time `json:"resets_at,omitempty"`
	}
	ConcurrencyQuota struct {
		Limit     int `json:"limit"`
		InFlight  int `json:"in_flight"`
		Remaining int `json:"remaining"`
	}
)

// Serve answers GET /rate_limit.
func (q *Quotas) Serve(c *gin.Context) {
	p, err := q.gate.Admit(c.Request.Context(), gate.Ask{})
	if !httpx.Admitted(c, p, err) {
		return
	}
	defer p.Done()
	ctx := c.Request.Context()
	id := auth.FromContext(ctx)
	identity := id.LimitKey()
	// A layer's own policy applies to the caller only through layers it
	// may read; the others stay unnamed, as everywhere else.
	layers := map[string][]string{}
	for layer, rule := range q.rules.Layers {
		if rule.Policy != "" && q.rules.Check(ctx, layer) == nil {
			layers[rule.Policy] = append(layers[rule.Policy], layer)
		}
	}
	var names []string
	for p := range q.guards {
		names = append(names, p)
	}
	for p := range layers {
		if _, ok := q.guards[p]; !ok {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	usage := make([]ratelimit.Usage, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, p := range names {
		wg.Go(func() {
			usage[i], errs[i] = q.limiter.Usage(ctx, ratelimit.Request{Policy: p, Identity: identity, Tier: id.Tier})
		})
	}
	wg.Wait()
	ans := QuotaAnswer{Identity: identity, Policies: make([]PolicyQuota, len(names))}
	if id.Tier != "" {
		ans.Tier = &id.Tier
	}
	for i, p := range names {
		if errs[i] != nil {
			httpx.Abort(c, errs[i])
			return
		}
		u := usage[i]
		pq := PolicyQuota{Policy: p, Unit: q.unitName(p), Routes: q.guards[p], Windows: []WindowQuota{}, Shadow: u.Shadow, Counted: u.Backend}
		if ls := layers[p]; len(ls) > 0 {
			slices.Sort(ls)
			pq.Layers = ls
			for _, r := range q.layerRoutes {
				if !slices.Contains(pq.Routes, r) {
					pq.Routes = append(pq.Routes, r)
				}
			}
		}
		for _, w := range u.Windows {
			wq := WindowQuota{Name: w.Name, Limit: w.Limit, Window: seconds(w.Period), Used: w.Used, Remaining: w.Remaining, Reset: seconds(w.Reset)}
			if w.Calendar != "" {
				ends := w.Ends
				wq.Calendar, wq.Timezone, wq.ResetsAt = string(w.Calendar), ends.Location().String(), &ends
			}
			pq.Windows = append(pq.Windows, wq)
		}
		if u.Concurrency > 0 {
			pq.Concurrency = &ConcurrencyQuota{Limit: u.Concurrency, InFlight: u.InFlight, Remaining: max(0, u.Concurrency-u.InFlight)}
		}
		ans.Policies[i] = pq
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, ans)
}

// seconds rounds d up to whole seconds, as the RateLimit headers do.
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// unitName is how /rate_limit names what a policy's windows count.
func (q *Quotas) unitName(policy string) string {
	if p, ok := q.limiter.Policy(policy); ok && p.Unit() == ratelimit.DBTime {
		return "db-ms"
	}
	return "requests"
}
