package features

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ahead keeps the next page of items ready for a client that walks a
// collection's pages through their next links, as GDAL, QGIS and OWSLib
// do to copy a layer. Such a client asks for a page only once it has read
// the one before, so the database and the service would sit idle while it
// parses; instead, a request that follows a next link handed out moments
// ago starts reading the page after its own, and that page is kept until
// the client asks for it.
//
// A first page starts nothing (a map client asks for one page of each
// place it looks at), nor does a cursor that was not handed out within
// keep (a client that collected cursors and asks for them in any order).
// Pages kept take at most max bytes in all (a read that would pass it is
// dropped as it grows), a caller has at most perCaller pages read ahead,
// and a page nobody asks for within keep of being read is dropped.
type ahead struct {
	max  int
	keep time.Duration
	m    *aheadMetrics

	mu      sync.Mutex
	held    int                  // bytes of the pages kept or being read
	pages   map[string]*early    // by walk key
	callers map[string]int       // pages read ahead per caller
	handed  map[string]time.Time // walk keys of next links, until when they count
}

// perCaller bounds the pages one caller has read ahead: a few walks at
// once, not a crawl of every layer.
const perCaller = 4

// maxHanded bounds the next links remembered.
const maxHanded = 100_000

// early is a page read before it was asked for. Its fields are set
// before ready closes and read only after.
type early struct {
	caller string
	ready  chan struct{}
	body   []byte // the answer from its start through its last feature
	page   Page
	crs    CRS
	// version is the layer's data version, read before the page: the
	// page is served only while the layer is still at it.
	version int64
	db      time.Duration // the database time of the read
	err     error
	size    int // bytes counted in held
}

// errTooBig ends a read ahead that would pass the bytes allowed.
var errTooBig = errors.New("features: the page read ahead passes FEATURES_PREFETCH_MB")

func newAhead(max int, keep time.Duration, reg prometheus.Registerer) *ahead {
	return &ahead{max: max, keep: keep, m: newAheadMetrics(reg),
		pages: map[string]*early{}, callers: map[string]int{}, handed: map[string]time.Time{}}
}

// walkKey names a request of caller for collection id with parameters
// v (cursor included): the key of its page read ahead.
func walkKey(caller, id, query string) string { return caller + "\x00" + id + "\x00" + query }

// handOut remembers that the request of key is a next link just given
// out: asked for within keep, it is a walk.
func (a *ahead) handOut(key string) {
	if a.max <= 0 {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.handed) >= maxHanded {
		for k, until := range a.handed {
			if now.After(until) {
				delete(a.handed, k)
			}
		}
		if len(a.handed) >= maxHanded {
			return
		}
	}
	a.handed[key] = now.Add(a.keep)
}

// walking says whether the request of key follows a next link handed
// out within keep; a link counts once.
func (a *ahead) walking(key string) bool {
	if a.max <= 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.handed[key]
	delete(a.handed, key)
	return ok && time.Now().Before(until)
}

// start reads the page of key ahead with read, unless it is being read
// already or a bound says no. read fills e's fields and calls grow as
// the page grows.
func (a *ahead) start(caller, key string, read func(e *early)) {
	a.mu.Lock()
	if a.max <= 0 || a.pages[key] != nil || a.callers[caller] >= perCaller || a.held >= a.max {
		a.mu.Unlock()
		return
	}
	e := &early{caller: caller, ready: make(chan struct{})}
	a.pages[key] = e
	a.callers[caller]++
	a.mu.Unlock()
	go func() {
		read(e)
		a.m.read()
		close(e.ready)
		if errors.Is(e.err, errTooBig) {
			a.m.count("too_big")
		}
		time.AfterFunc(a.keep, func() {
			if a.remove(key, e) {
				a.m.count("unasked")
				a.release(e)
			}
		})
	}()
}

// grow counts n more bytes of e, false when they would pass max.
func (a *ahead) grow(e *early, n int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held+n > a.max {
		return false
	}
	a.held += n
	e.size += n
	return true
}

// release gives back the bytes of e, once it is read and served or
// dropped.
func (a *ahead) release(e *early) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held -= e.size
	e.size = 0
}

// remove takes e off the pages kept, if it is still there.
func (a *ahead) remove(key string, e *early) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pages[key] != e {
		return false
	}
	delete(a.pages, key)
	if a.callers[e.caller]--; a.callers[e.caller] <= 0 {
		delete(a.callers, e.caller)
	}
	return true
}

// take returns the page of key once read, or nil when none was read
// ahead or ctx ended first. The caller releases it once served.
func (a *ahead) take(ctx context.Context, key string) *early {
	a.mu.Lock()
	e := a.pages[key]
	a.mu.Unlock()
	if e == nil || !a.remove(key, e) {
		return nil
	}
	select {
	case <-e.ready:
		return e
	case <-ctx.Done():
		go func() { <-e.ready; a.release(e) }()
		return nil
	}
}

// aheadMetrics count what became of the pages read ahead; nil does
// nothing.
type aheadMetrics struct {
	pages *prometheus.CounterVec
	reads prometheus.Counter
}

func newAheadMetrics(reg prometheus.Registerer) *aheadMetrics {
	if reg == nil {
		return nil
	}
	m := &aheadMetrics{pages: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "geogate_features_pages_ahead_total",
		Help: "Items pages read ahead for clients walking next links, by what became of them: served, stale (the layer changed since), failed, too_big, unasked (dropped after FEATURES_PREFETCH_KEEP).",
	}, []string{"outcome"}),
		reads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_features_pages_read_ahead_total",
			Help: "Items pages whose read ahead has ended, whatever became of them.",
		})}
	reg.MustRegister(m.pages, m.reads)
	return m
}

func (m *aheadMetrics) read() {
	if m != nil {
		m.reads.Inc()
	}
}

func (m *aheadMetrics) count(outcome string) {
	if m != nil {
		m.pages.WithLabelValues(outcome).Inc()
	}
}
