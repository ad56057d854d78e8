package gate

import (
	"container/list"
	"math"
	"sync"
)

// kind is what a request's database time is learned under: its group
// (the route, the policy and the layers) and its size within the group
// (a page size, a zoom, a radius; whether it filters).
type kind struct{ group, size string }

// estimates learn the database time of each kind of request, as an
// exponentially weighted mean of what was measured, so that the
// reservation of the next one is close to what it will cost.
//
// Nobody can wipe them: handlers name layers only after looking them up,
// so every group is a real route and real layers; past maxGroups groups,
// or maxSizes sizes in a group, the least recently used is forgotten,
// one at a time, never the whole table. Keys longer than maxKey are not
// kept at all.
type estimates struct {
	mu     sync.Mutex
	groups map[string]*list.Element // of *group
	lru    list.List                // most recently used first
}

type group struct {
	name  string
	sizes map[string]*list.Element // of *estimate
	lru   list.List
}

type estimate struct {
	size string
	ms   float64
}

// Bounds of the estimates kept.
const (
	maxGroups = 2048
	maxSizes  = 64
	maxKey    = 1024
)

// newWeight is the share of the newest measurement in the mean.
const newWeight = 0.2

func newEstimates() *estimates { return &estimates{groups: map[string]*list.Element{}} }

// of is the reservation, in whole milliseconds of at least 1, for a
// request of kind k counted weight times.
func (e *estimates) of(k kind, weight int) int {
	m := 1.0
	e.mu.Lock()
	if est := e.find(k); est != nil {
		m = est.ms
	}
	e.mu.Unlock()
	return max(1, int(math.Ceil(m*float64(weight))))
}

// find returns k's estimate, marking it used; nil when none is kept.
func (e *estimates) find(k kind) *estimate {
	ge, ok := e.groups[k.group]
	if !ok {
		return nil
	}
	g := ge.Value.(*group)
	se, ok := g.sizes[k.size]
	if !ok {
		return nil
	}
	e.lru.MoveToFront(ge)
	g.lru.MoveToFront(se)
	return se.Value.(*estimate)
}

// learn takes a measurement of ms per weight unit for kind k.
func (e *estimates) learn(k kind, ms float64) {
	if len(k.group)+len(k.size) > maxKey {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if est := e.find(k); est != nil {
		est.ms += newWeight * (ms - est.ms)
		return
	}
	ge, ok := e.groups[k.group]
	if !ok {
		if e.lru.Len() >= maxGroups {
			old := e.lru.Remove(e.lru.Back()).(*group)
			delete(e.groups, old.name)
		}
		ge = e.lru.PushFront(&group{name: k.group, sizes: map[string]*list.Element{}})
		e.groups[k.group] = ge
	}
	e.lru.MoveToFront(ge)
	g := ge.Value.(*group)
	if g.lru.Len() >= maxSizes {
		old := g.lru.Remove(g.lru.Back()).(*estimate)
		delete(g.sizes, old.size)
	}
	g.sizes[k.size] = g.lru.PushFront(&estimate{size: k.size, ms: ms})
}

// len is how many estimates are kept.
func (e *estimates) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ge := range e.groups {
		n += len(ge.Value.(*group).sizes)
	}
	return n
}
