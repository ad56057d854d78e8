package gate

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// settle charges each policy what the request really cost: the database
// time measured, for a policy that counts it, or the cost the handler
// reported; and learns the estimates from it.
func (p *pass) settle() {
	if len(p.charges) == 0 {
		return
	}
	var ms float64
	measured := p.g.DBTime != nil
	if measured {
		ms = float64(p.g.DBTime(p.ctx)) / float64(time.Millisecond)
	}
	var weights int
	for _, ch := range p.charges {
		if ch.dbTime {
			weights += ch.weight
		}
	}
	ctx := context.WithoutCancel(p.ctx)
	for _, ch := range p.charges {
		actual := ch.cost
		switch {
		case ch.dbTime && measured:
			share := ms * float64(ch.weight) / float64(weights)
			actual = max(1, int(math.Ceil(share)))
			p.g.est.learn(ch.learn, share/float64(ch.weight))
		case !ch.dbTime && p.usage.Cost > 0:
			actual = p.usage.Cost * ch.weight
		}
		if actual == ch.cost {
			continue
		}
		if err := p.g.limiter.Settle(ctx, ch.decision, actual); err != nil {
			p.g.log.Warn("gate: a request's true cost was not settled; its reservation stands", "policy", ch.policy, "err", err.Error())
		}
	}
}

// learnKey names what a charge's database time is learned under: the
// route, the policy, the layers and the request's size.
func learnKey(route string, ch charge, a Ask) string {
	size := a.Size
	if size == "" {
		size = strconv.Itoa(max(a.Cost, 1))
	}
	return route + "|" + ch.policy + "|" + strings.Join(a.Layers, ",") + "|" + size
}

// estimates learn the database time of each kind of request, as an
// exponentially weighted mean of what was measured, so that the
// reservation of the next one is close to what it will cost.
type estimates struct {
	mu sync.Mutex
	ms map[string]float64
}

// maxEstimates bounds the kinds remembered: past it they are forgotten
// and learned again.
const maxEstimates = 10000

// newWeight is the share of the newest measurement in the mean.
const newWeight = 0.2

func newEstimates() *estimates { return &estimates{ms: map[string]float64{}} }

// of is the reservation, in whole milliseconds of at least 1, for a
// request of kind key counted weight times.
func (e *estimates) of(key string, weight int) int {
	e.mu.Lock()
	m, ok := e.ms[key]
	e.mu.Unlock()
	if !ok {
		m = 1
	}
	return max(1, int(math.Ceil(m*float64(weight))))
}

// learn takes a measurement of ms per weight unit for kind key.
func (e *estimates) learn(key string, ms float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.ms[key]
	switch {
	case !ok && len(e.ms) >= maxEstimates:
		clear(e.ms)
		fallthrough
	case !ok:
		e.ms[key] = ms
	default:
		e.ms[key] = m + newWeight*(ms-m)
	}
}
