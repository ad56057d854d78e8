package auth

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/pg"
)

// KeyChannel is where the api_keys trigger (migration 00012) announces a
// changed key, its id as the payload, when the writing transaction
// commits; an empty payload (TRUNCATE) stands for every key.
const KeyChannel = "geogate_keys"

// KeyEvents keeps a KeyCache in step with the api_keys table: it listens
// on KeyChannel on a connection of its own and makes the cache forget
// each key named there, so that a revocation or any other change reaches
// every replica as soon as PostgreSQL delivers the notification. After
// each (re)connection it flushes the cache, making up for notifications
// missed while disconnected. While it is disconnected the cache's TTL is
// what bounds how long a change takes.
type KeyEvents struct {
	db    *pgxpool.Pool
	cache *KeyCache
	log   *slog.Logger

	l atomic.Pointer[pg.Listener]
	// before, if set, runs before the cache forgets anything (replica
	// look-ups raise their floor there).
	before    func(context.Context)
	readyOnce sync.Once
	ready     chan struct{}
}

// NewKeyEvents returns KeyEvents for cache on db; log may be nil. If
// registerer is set it receives geogate_auth_key_events_listening.
func NewKeyEvents(db *pgxpool.Pool, cache *KeyCache, log *slog.Logger, registerer prometheus.Registerer) *KeyEvents {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &KeyEvents{db: db, cache: cache, log: log, ready: make(chan struct{})}
	if registerer != nil {
		registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "geogate_auth_key_events_listening",
			Help: "1 while this process listens for API key changes; 0 while it relies on API_KEY_CACHE_TTL alone.",
		}, func() float64 {
			if e.Listening() {
				return 1
			}
			return 0
		}))
	}
	return e
}

// Ready is closed once the first LISTEN is in place.
func (e *KeyEvents) Ready() <-chan struct{} { return e.ready }

// Listening reports whether the listener is connected now.
func (e *KeyEvents) Listening() bool {
	l := e.l.Load()
	return l != nil && l.Listening()
}

func (e *KeyEvents) changed(ctx context.Context) {
	if e.before != nil {
		e.before(ctx)
	}
}

// Run listens until ctx ends, reconnecting after failures (see
// pg.Listener). After each (re)connection the cache is flushed: whatever
// changed while nobody listened is forgotten wholesale.
func (e *KeyEvents) Run(ctx context.Context) {
	l := &pg.Listener{
		Pool: e.db, Channels: []string{KeyChannel}, Log: e.log,
		Topic: "API key (changes to keys take up to API_KEY_CACHE_TTL until it reconnects)",
		OnListen: func() {
			e.changed(ctx)
			e.cache.Flush()
			e.readyOnce.Do(func() { close(e.ready) })
		},
		OnNotify: func(_, payload string) {
			e.changed(ctx)
			if payload == "" {
				e.cache.Flush()
			} else {
				e.cache.Forget(payload)
			}
		},
	}
	e.l.Store(l)
	l.Run(ctx)
}
