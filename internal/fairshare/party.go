package fairshare

import (
	"context"
	"sync"
	"time"
)

// Party is the callers sharing one database call, such as a tile
// rendered once for everyone who asked for it meanwhile. The queue
// admits the call as the lightest of them (a light caller does not wait
// behind the heavy one that happened to ask first) and splits the time
// it held a connection evenly among them.
type Party struct {
	mu      sync.Mutex
	callers []caller
}

// NewParty returns a Party of the caller of ctx.
func NewParty(ctx context.Context) *Party {
	return &Party{callers: []caller{callerOf(ctx)}}
}

// Join adds the caller of ctx to p, if it is not in it yet.
func (p *Party) Join(ctx context.Context) {
	c := callerOf(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.callers {
		if x.id == c.id {
			return
		}
	}
	p.callers = append(p.callers, c)
}

func (p *Party) members() []caller {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]caller(nil), p.callers...)
}

type partyKey struct{}

// WithParty returns ctx whose database calls the queue admits for p
// rather than for ctx's caller.
func WithParty(ctx context.Context, p *Party) context.Context {
	return context.WithValue(ctx, partyKey{}, p)
}

func partyOf(ctx context.Context) *Party {
	p, _ := ctx.Value(partyKey{}).(*Party)
	return p
}

// partyIdentity is the identity a call of p waits and holds its slot
// as: of its own, so that its order follows its members' loads as they
// join, and not kept among the queue's identities.
func (q *Queue) partyIdentity(p *Party) *identity {
	return &identity{id: "", weight: 1, party: p}
}

// partyLoad is the least load of p's members: one that has not called
// yet weighs nothing.
func (q *Queue) partyLoad(p *Party, now time.Time) float64 {
	least := -1.0
	for _, c := range p.members() {
		l := 0.0
		if id, ok := q.ids[c.id]; ok {
			l = q.load(id, now)
		}
		if least < 0 || l < least {
			least = l
		}
	}
	return max(least, 0)
}

// chargeParty splits h seconds among p's members.
func (q *Queue) chargeParty(p *Party, h float64, now time.Time) {
	ms := p.members()
	for _, c := range ms {
		id := q.identity(c, now)
		id.fade(now, q.s.HalfLife)
		id.usage += h / float64(len(ms))
	}
}
