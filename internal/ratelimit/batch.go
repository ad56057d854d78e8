package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls of concurrent decisions to Redis in
// pipelines: each of its workers takes every call waiting (up to max) and
// sends them in one round trip. Each script still runs atomically on its
// own; only the network round trips are shared.
type batcher struct {
	c        redis.UniversalClient
	in       chan *call
	max      int
	timeout  time.Duration
	onReload func()
	quit     chan struct{}
	wg       sync.WaitGroup
}

type call struct {
	// gone is closed once the caller no longer waits (its context's Done),
	// so that a sender skips a call nobody reads.
	gone <-chan struct{}
	sc   *redis.Script
	keys []string
	args []any
	v    any
	err  error
	done chan struct{}
}

var errClosed = errors.New("ratelimit: limiter closed")

func newBatcher(c redis.UniversalClient, max, workers int, timeout time.Duration, onReload func()) *batcher {
	// A buffered queue: a caller hands its call over without waiting for
	// a sender to be ready (and without a wake-up just to do that); it
	// then sleeps once, until its answer is in.
	b := &batcher{c: c, in: make(chan *call, max*workers), max: max, timeout: timeout, onReload: onReload, quit: make(chan struct{})}
	for range workers {
		b.wg.Go(b.loop)
	}
	return b
}

// do runs one script call in the next pipeline.
func (b *batcher) do(ctx context.Context, sc *redis.Script, keys []string, args []any) (any, error) {
	cl := &call{gone: ctx.Done(), sc: sc, keys: keys, args: args, done: make(chan struct{})}
	select {
	case b.in <- cl:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errClosed
	}
	select {
	case <-cl.done:
		return cl.v, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *batcher) loop() {
	batch := make([]*call, 0, b.max)
	for {
		select {
		case cl := <-b.in:
			batch = append(batch[:0], cl)
		case <-b.quit:
			return
		}
	fill:
		for len(batch) < b.max {
			select {
			case cl := <-b.in:
				batch = append(batch, cl)
			default:
				break fill
			}
		}
		b.exec(batch)
	}
}

func (b *batcher) exec(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	pipe := b.c.Pipeline()
	cmds := make([]*redis.Cmd, 0, len(batch))
	live := batch[:0:0]
	for _, cl := range batch {
		select {
		case <-cl.gone:
			cl.err = context.Canceled // the caller returned its own context's error
			close(cl.done)
			continue
		default:
		}
		cmds = append(cmds, pipe.EvalSha(ctx, cl.sc.Hash(), cl.keys, cl.args...))
		live = append(live, cl)
	}
	if len(live) == 0 {
		return
	}
	_, _ = pipe.Exec(ctx)
	for i, cl := range live {
		cl.v, cl.err = cmds[i].Result()
		if cl.err != nil && (errors.Is(cl.err, redis.ErrNoScript) || redis.HasErrorPrefix(cl.err, "NOSCRIPT")) {
			b.onReload()
			cl.v, cl.err = cl.sc.Eval(ctx, b.c, cl.keys, cl.args...).Result()
		}
		close(cl.done)
	}
}

func (b *batcher) close() {
	close(b.quit)
	b.wg.Wait()
}
