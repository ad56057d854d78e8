package auth

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
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

	listening atomic.Bool
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
			if e.listening.Load() {
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
func (e *KeyEvents) Listening() bool { return e.listening.Load() }

// Run listens until ctx ends, reconnecting after failures with a backoff
// of 100 ms doubling up to 5 s.
func (e *KeyEvents) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		heard, err := e.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if heard {
			backoff = 100 * time.Millisecond
		}
		e.log.Warn("API key listener stopped; changes to keys take up to API_KEY_CACHE_TTL until it reconnects",
			"err", err.Error(), "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen holds one LISTEN until it fails; connected says it got as far
// as listening.
func (e *KeyEvents) listen(ctx context.Context) (connected bool, err error) {
	pc, err := e.db.Acquire(ctx)
	if err != nil {
		return false, err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	// Waiting for a notification runs no statement a cancel request could
	// end: close the connection as soon as ctx ends instead.
	stop := context.AfterFunc(ctx, func() { _ = conn.PgConn().Conn().Close() })
	defer stop()
	if _, err := conn.Exec(ctx, "LISTEN "+KeyChannel); err != nil {
		return false, err
	}
	// Whatever changed while nobody listened is forgotten wholesale.
	e.cache.Flush()
	e.listening.Store(true)
	defer e.listening.Store(false)
	e.readyOnce.Do(func() { close(e.ready) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if n.Payload == "" {
			e.cache.Flush()
		} else {
			e.cache.Forget(n.Payload)
		}
	}
}
