// Package delivery sends the outbox's events to their subscriptions'
// webhooks, at least once and in order per (subscription, device). Any
// number of workers, in any number of replicas, share the outbox: each
// claims due events under a lease, so that no two send the same event at
// the same time, and an event whose sender died is claimed again once its
// lease runs out.
package delivery

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/webhook"
)

// Settings tune delivery.
type Settings struct {
	// Workers bounds the deliveries in flight in this process; 0 turns
	// delivery off here (another replica delivers).
	Workers int
	// PerSubscription bounds the deliveries in flight for one
	// subscription, so that a slow receiver holds at most that many
	// workers.
	PerSubscription int
	// Timeout bounds one webhook request; Lease, longer, is how long a
	// claimed event is left to its worker before another may take it.
	Timeout time.Duration
	Lease   time.Duration
	// RetryFor is how long after its creation (or its replay) an event is
	// retried before it is dead-lettered.
	RetryFor time.Duration
	// RetryMin and RetryMax bound the backoff between attempts before
	// jitter: RetryMin doubles per attempt up to RetryMax.
	RetryMin time.Duration
	RetryMax time.Duration
	// Poll is the longest a worker waits without a notification before
	// it looks for due events (retries, expired leases) again.
	Poll time.Duration
	// Webhooks say where deliveries may connect: off AllowPrivate, a
	// webhook's deliveries to this machine or a private network fail and,
	// retried, end as dead letters.
	Webhooks webhook.Rules
	// Policy is the rate-limit policy each delivery spends, per
	// subscription owner.
	Policy string
}

// Gate decides whether a subscription owner may have one more delivery
// now (gate.Gate), as it decides a request: the owner is named with
// gate.As.
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
}

// Worker delivers the outbox's due events.
type Worker struct {
	pool *pgxpool.Pool
	s    Settings
	send *sender
	gate Gate
	m    *Metrics
	log  *slog.Logger

	wakeCh   chan struct{}
	inFlight atomic.Int64
}

// New returns a worker over pool. g may be nil: no per-owner limit.
func New(pool *pgxpool.Pool, s Settings, g Gate, m *Metrics, log *slog.Logger) *Worker {
	if m == nil {
		m = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Worker{pool: pool, s: s, send: newSender(s.Timeout, s.Webhooks.AllowPrivate), gate: g, m: m, log: log,
		wakeCh: make(chan struct{}, 1)}
}

// wake makes the loop look for due events now.
func (w *Worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the deliveries it started.
// A delivery cut short by ctx gives its event back (its lease is
// dropped): the receiver may see it again, never lose it.
func (w *Worker) Run(ctx context.Context) {
	if w.s.Workers <= 0 {
		return
	}
	l := &pg.Listener{Pool: w.pool, Channels: []string{outbox.DeliveriesChannel}, Log: w.log, Topic: "event delivery",
		OnListen: w.wake, OnNotify: func(string, string) { w.wake() }}
	go l.Run(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		if free := w.s.Workers - int(w.inFlight.Load()); free > 0 {
			for _, c := range w.claim(ctx, free) {
				w.inFlight.Add(1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.deliver(ctx, c)
					w.inFlight.Add(-1)
					w.wake() // a slot is free, and the device's next event may be due
				}()
			}
		}
		w.pause(ctx)
	}
}

// pause waits for a notification, a finished delivery, or the next due
// event (a retry, an expired lease), at most Poll.
func (w *Worker) pause(ctx context.Context) {
	wait := w.s.Poll
	if next, ok := w.look(ctx); ok && next < wait {
		wait = max(next, time.Millisecond)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.wakeCh:
	case <-t.C:
	}
}
