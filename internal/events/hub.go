package events

import (
	"sync"
	"time"

	"github.com/geogate/geogate/internal/apperr"
)

// Hub wakes a process's live streams: one LISTEN on
// outbox.EventsChannel (a
// pg.Listener calling Notify and WakeAll) fans each notification out to
// the streams following that subscription, so that a thousand open
// streams cost one database connection, not a thousand.
type Hub struct {
	mu      sync.Mutex
	streams map[string]map[chan struct{}]struct{}
	stop    chan struct{}
	once    sync.Once
	listen  func()
	started sync.Once
	// opened counts the live streams of each identity.
	opened map[string]int
}

// NewHub returns a hub with no streams. listen, when not nil, is run in
// a goroutine of its own when the first stream begins: a process that
// serves no stream holds no listening connection.
func NewHub(listen func()) *Hub {
	return &Hub{streams: map[string]map[chan struct{}]struct{}{}, stop: make(chan struct{}), listen: listen, opened: map[string]int{}}
}

// Notify wakes the streams of subscription sub (a notification's payload).
func (h *Hub) Notify(_, sub string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.streams[sub] {
		wake(w)
	}
}

// WakeAll wakes every stream: after the listener (re)connects, since
// notifications sent while nobody listened are lost.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.streams {
		for w := range ws {
			wake(w)
		}
	}
}

// Stop ends every stream, now and to come: the service is shutting down,
// and a stream would otherwise hold its connection open until the
// shutdown's deadline.
func (h *Hub) Stop() { h.once.Do(func() { close(h.stop) }) }

// Stopped is closed once Stop has been called.
func (h *Hub) Stopped() <-chan struct{} { return h.stop }

// follow registers a stream of sub and returns the channel that wakes it
// and the func that ends its registration.
func (h *Hub) follow(sub string) (<-chan struct{}, func()) {
	if h.listen != nil {
		h.started.Do(func() { go h.listen() })
	}
	w := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[sub] == nil {
		h.streams[sub] = map[chan struct{}]struct{}{}
	}
	h.streams[sub][w] = struct{}{}
	return w, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.streams[sub], w)
		if len(h.streams[sub]) == 0 {
			delete(h.streams, sub)
		}
	}
}

// wake marks w woken; a stream already woken and not yet awake needs no
// second call, it reads everything new when it runs.
func wake(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// streamRetry is the Retry-After of a stream refused for the cap: a
// client that reconnects at once after a drop finds its old stream
// still counted until the server notices the drop.
const streamRetry = 5 * time.Second

// open counts one more live stream of identity, up to most (0: no cap),
// and returns the func that ends it; over the cap, a 429.
func (h *Hub) open(identity string, most int) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if most > 0 && h.opened[identity] >= most {
		e := apperr.Limited("Too many live event streams open at once for these credentials: close one first.", "events-streams")
		e.RetryAfter = streamRetry
		return nil, e
	}
	h.opened[identity]++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.opened[identity]--; h.opened[identity] <= 0 {
				delete(h.opened, identity)
			}
		})
	}, nil
}
