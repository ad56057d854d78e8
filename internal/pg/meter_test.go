package pg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/pg"
)

func sleepFor(d time.Duration) func(ctx context.Context, conn pg.Conn) error {
	return func(ctx context.Context, conn pg.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_sleep($1)", d.Seconds())
		return err
	}
}

func TestMeterCountsHeldTimeNotTheWait(t *testing.T) {
	pool := open(t, pg.Options{MaxConns: 1})
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 10 * time.Second, AcquireTimeout: 10 * time.Second}}
	ctx := context.Background()
	held, err := pool.Acquire(ctx) // the pool's only connection
	if err != nil {
		t.Fatal(err)
	}
	mctx, m := pg.WithMeter(ctx)
	started := time.Now()
	done := make(chan error, 1)
	go func() { done <- run.Do(mctx, sleepFor(50*time.Millisecond)) }()
	time.Sleep(100 * time.Millisecond) // a wait the meter must not see
	// The call cannot have acquired the connection before it is released:
	// it waits at least this long. Read before the release, which lets
	// the call start at once, ahead of anything this goroutine does next.
	waited := time.Since(started)
	held.Release()
	if err := <-done; err != nil {
		t.Fatalf("Do() = %v", err)
	}
	total := time.Since(started)
	got := m.DB()
	if got < 50*time.Millisecond {
		t.Errorf("Meter.DB() = %v after pg_sleep(0.05), want at least 50ms", got)
	}
	if got > total-waited {
		t.Errorf("Meter.DB() = %v, want at most %v: the call took %v of which %v waiting for the connection", got, total-waited, total, waited)
	}
}

func TestMeterAddsUpConcurrentCalls(t *testing.T) {
	pool := open(t, pg.Options{MaxConns: 4})
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 10 * time.Second, AcquireTimeout: 10 * time.Second}}
	ctx, m := pg.WithMeter(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := run.Do(ctx, sleepFor(20*time.Millisecond)); err != nil {
				t.Errorf("Do() = %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := run.Read(ctx, sleepFor(20*time.Millisecond)); err != nil {
				t.Errorf("Read() = %v", err)
			}
		}()
	}
	wg.Wait()
	if got, want := m.DB(), 8*20*time.Millisecond; got < want {
		t.Errorf("Meter.DB() = %v after eight pg_sleep(0.02), want at least %v", got, want)
	}
}

func TestMeterOf(t *testing.T) {
	if m := pg.MeterOf(context.Background()); m != nil {
		t.Errorf("MeterOf(context without a meter) = %v, want nil", m)
	}
	if got := pg.MeterOf(context.Background()).DB(); got != 0 {
		t.Errorf("nil Meter's DB() = %v, want 0", got)
	}
	ctx, m := pg.WithMeter(context.Background())
	if got := pg.MeterOf(ctx); got != m {
		t.Errorf("MeterOf(WithMeter()) = %p, want %p", got, m)
	}
}
