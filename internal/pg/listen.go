package pg

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener holds LISTEN on some channels on a connection taken out of a
// pool for good, and hands each notification to OnNotify. It reconnects
// after a failure, with a backoff of 100 ms doubling up to 5 s, and calls
// OnListen after every LISTEN is in place, so that its user can make up
// for notifications missed while nobody listened.
type Listener struct {
	Pool     *pgxpool.Pool
	Channels []string
	OnListen func()
	OnNotify func(channel, payload string)
	// Log receives a warning per failure; Topic says what is lost.
	Log   *slog.Logger
	Topic string

	listening atomic.Bool
}

// channelName is what a channel may be called: a plain identifier, written
// into LISTEN as it is.
var channelName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Listening reports whether the listener is connected now.
func (l *Listener) Listening() bool { return l.listening.Load() }

// Run listens until ctx ends.
func (l *Listener) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		heard, err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if heard {
			backoff = 100 * time.Millisecond
		}
		if l.Log != nil {
			l.Log.Warn(l.Topic+" listener stopped; reconnecting", "err", err.Error(), "in", backoff.String())
		}
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
func (l *Listener) listen(ctx context.Context) (connected bool, err error) {
	pc, err := l.Pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	// Waiting for a notification runs no statement a cancel request could
	// end: close the connection as soon as ctx ends instead.
	stop := context.AfterFunc(ctx, func() { _ = conn.PgConn().Conn().Close() })
	defer stop()
	stmts := make([]string, len(l.Channels))
	for i, c := range l.Channels {
		if !channelName.MatchString(c) {
			return false, fmt.Errorf("channel name %q: want lower-case letters, digits and _", c)
		}
		stmts[i] = "LISTEN " + c
	}
	if _, err := conn.Exec(ctx, strings.Join(stmts, "; ")); err != nil {
		return false, err
	}
	l.listening.Store(true)
	defer l.listening.Store(false)
	if l.OnListen != nil {
		l.OnListen()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.OnNotify(n.Channel, n.Payload)
	}
}
