package gate

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"
)

// settle charges each policy what the request really cost: the database
// time measured, for a policy that counts it, or the cost the handler
// reported; and learns the estimates from it.
//
// The database time of a request is measured as a whole. Each worked
// layer is taken to have spent an equal share of it, and each share
// counts its layer's multiplier times: one layer of cost 5 that held a
// connection 30 ms is charged 150 ms.
func (p *pass) settle() {
	if len(p.charges) == 0 {
		return
	}
	var ms float64
	measured := p.g.DBTime != nil
	if measured {
		ms = float64(p.g.DBTime(p.ctx)-p.before) / float64(time.Millisecond)
	}
	perLayer := ms / float64(max(1, p.worked))
	ctx := context.WithoutCancel(p.ctx)
	for i, ch := range p.charges {
		actual := ch.cost
		switch {
		case ch.dbTime && measured:
			actual = max(1, int(math.Ceil(perLayer*float64(ch.weight)))+p.usage.Bytes/BytesPerMS)
			p.g.est.learn(ch.learn, perLayer)
		case !ch.dbTime && p.usage.Cost > 0:
			actual = p.usage.Cost * ch.weight
		}
		p.charges[i].actual = actual
		if actual == ch.cost {
			continue
		}
		if err := p.g.limiter.Settle(ctx, ch.decision, actual); err != nil {
			p.g.log.Warn("gate: a request's true cost was not settled; its reservation stands", "policy", ch.policy, "err", err.Error())
		}
	}
}

// learnKey names what a charge's database time is learned under: the
// route and policy (the group) and the request's size within it.
func learnKey(route, policy string, a Ask) kind {
	size := a.Size
	if size == "" {
		size = strconv.Itoa(max(a.Cost, 1))
	}
	return kind{group: route + "|" + policy + "|" + strings.Join(a.Layers, ","), size: size}
}
