package fairshare_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/fairshare"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// outcomes gathers how one identity's calls went.
type outcomes struct {
	mu    sync.Mutex
	waits []time.Duration // of the calls that ran
	shed  int
	other []error
}

func (o *outcomes) add(wait time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.waits = append(o.waits, wait)
	case apperr.KindOf(err) == apperr.Reduced:
		o.shed++
	case !errors.Is(err, context.Canceled):
		o.other = append(o.other, err)
	}
}

func (o *outcomes) ran() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.waits)
}

// quantile returns the q-quantile of the waits.
func (o *outcomes) quantile(q float64) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.waits) == 0 {
		return 0
	}
	w := slices.Clone(o.waits)
	slices.Sort(w)
	return w[min(int(q*float64(len(w))), len(w)-1)]
}

// call runs stmt through run and reports how long it waited before its
// statement could start; false when it was turned away.
func call(ctx context.Context, run *pg.Runner, stmt string, o *outcomes) bool {
	start := time.Now()
	var wait time.Duration
	err := run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		wait = time.Since(start)
		_, err := conn.Exec(ctx, stmt)
		return err
	})
	o.add(wait, err)
	return apperr.KindOf(err) != apperr.Reduced
}

// TestLightCallerGetsThroughSaturation saturates a pool of 4 connections
// with 8 heavy identities, each keeping 5 statements of 50 ms going, and
// checks that a light identity's quick statements still get through at
// once, none turned away, while the heavy are the ones who wait and are
// turned away.
func TestLightCallerGetsThroughSaturation(t *testing.T) {
	const slots = 4
	pool, err := pg.Open(context.Background(), testenv.Getenv(t, "TEST_DATABASE_URL"), pg.Options{MaxConns: slots, MinConns: slots})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q := fairshare.New(fairshare.Settings{Slots: slots, MaxWait: 400 * time.Millisecond})
	run := &pg.Runner{Pool: pool, Queue: q, Timeouts: pg.Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: 30 * time.Second}}

	ctx, stop := context.WithCancel(context.Background())
	var heavy outcomes
	var wg sync.WaitGroup
	for i := range 8 {
		hctx := fairshare.WithCaller(ctx, "heavy-"+string(rune('a'+i)), 1)
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for hctx.Err() == nil {
					if !call(hctx, run, "SELECT pg_sleep(0.05)", &heavy) {
						// As a client told to retry later would, if
						// sooner; spinning would only test the CPU.
						time.Sleep(20 * time.Millisecond)
					}
				}
			}()
		}
	}
	defer func() { stop(); wg.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	// Until every heavy identity has been served (the unserved, having
	// used nothing, go first) and the queue is long.
	for q.Waiting() < 20 || heavy.ran() < 16 {
		if time.Now().After(deadline) {
			t.Fatalf("the heavy callers never filled the queue: %d waiting", q.Waiting())
		}
		time.Sleep(time.Millisecond)
	}

	var light outcomes
	lctx := fairshare.WithCaller(ctx, "light", 1)
	for range 40 {
		call(lctx, run, "SELECT 1", &light)
	}
	stop()
	wg.Wait()

	if len(light.other) > 0 || len(heavy.other) > 0 {
		t.Fatalf("calls failed: light %v, heavy %v", light.other, heavy.other)
	}
	if light.shed != 0 || len(light.waits) != 40 {
		t.Errorf("light caller: %d of 40 ran, %d turned away; want all 40 to run", len(light.waits), light.shed)
	}
	if heavy.shed == 0 {
		t.Errorf("heavy callers: none turned away with 40 statements of 50 ms on 4 slots and a 400 ms wait; want some")
	}
	lp99, hp50 := light.quantile(0.99), heavy.quantile(0.5)
	t.Logf("light waits p50 %v p99 %v; heavy p50 %v p99 %v; heavy turned away %d, ran %d",
		light.quantile(0.5), lp99, hp50, heavy.quantile(0.99), heavy.shed, len(heavy.waits))
	// One slot is given back every 12.5 ms on average and the light
	// caller is first in line for it; a heavy call waits behind the
	// other heavy ones.
	if lp99 >= hp50/2 {
		t.Errorf("light caller's p99 wait %v, want it under half the heavy callers' median wait %v", lp99, hp50)
	}
}

// TestLimitFollowsTheDatabase runs a light identity's quick statements,
// then a crowd of CPU-bound ones beside them that is more than the
// machine's cores can run at once, then the light ones alone again: the
// queue admits fewer calls while the crowd slows the same light work
// down, and all of its slots again once it is gone.
func TestLimitFollowsTheDatabase(t *testing.T) {
	const slots = 8
	pool, err := pg.Open(context.Background(), testenv.Getenv(t, "TEST_DATABASE_URL"), pg.Options{MaxConns: slots, MinConns: slots})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q := fairshare.New(fairshare.Settings{Slots: slots, MaxWait: 20 * time.Second, Adaptive: true, MinSlots: 2, Tolerance: 1.5})
	run := &pg.Runner{Pool: pool, Queue: q, Timeouts: pg.Timeouts{QueryTimeout: 30 * time.Second, AcquireTimeout: 30 * time.Second}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var light outcomes
	lightDone := make(chan struct{})
	go func() {
		defer close(lightDone)
		lctx := fairshare.WithWork(fairshare.WithCaller(ctx, "light", 1), "count")
		for lctx.Err() == nil {
			call(lctx, run, "SELECT count(*) FROM generate_series(1, 200000)", &light)
			time.Sleep(5 * time.Millisecond) // a light caller's pace
		}
	}()
	waitUntil(t, func() bool { return light.ran() >= 40 }, 30*time.Second, "40 light calls unloaded")

	cctx, stopCrowd := context.WithCancel(ctx)
	var crowd outcomes
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hctx := fairshare.WithWork(fairshare.WithCaller(cctx, "heavy-"+string(rune('a'+i%4)), 1), "burn")
			for hctx.Err() == nil {
				call(hctx, run, "SELECT count(*) FROM generate_series(1, 3000000)", &crowd)
			}
		}()
	}
	waitUntil(t, func() bool { return q.Limit() <= slots/2 }, 30*time.Second, "the limit narrowed")
	t.Logf("under the crowd: limit %d, slowdown %.2f", q.Limit(), q.Slowdown())
	stopCrowd()
	wg.Wait()
	waitUntil(t, func() bool { return q.Limit() == slots }, 30*time.Second, "the limit back to every slot")
	stop()
	<-lightDone
	if len(light.other) > 0 || light.shed > 0 || len(crowd.other) > 0 {
		t.Fatalf("calls failed: light %v (%d turned away), crowd %v", light.other, light.shed, crowd.other)
	}
}

// waitUntil polls cond until it holds, failing the test after d.
func waitUntil(t *testing.T, cond func() bool, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // the queue moves every 100 ms
	}
}
