package ratelimit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/rdb"
	"github.com/geogate/geogate/internal/testenv"
)

// concurrentAdmissions fires n concurrent checks by one identity and
// returns how many were admitted.
func concurrentAdmissions(t *testing.T, l *Limiter, id string, n int) int {
	t.Helper()
	got, err := admissions(l, id, n)
	if err != nil {
		t.Error(err)
	}
	return got
}

// admissions is concurrentAdmissions outside a test: the first error, if
// any, with the count of the others.
func admissions(l *Limiter, id string, n int) (int, error) {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			d, err := l.Allow(context.Background(), "p", id, 1)
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return int(admitted.Load()), <-errs
}

// TestClusterExactness runs the exactness checks against a real
// three-master Redis Cluster.
func TestClusterExactness(t *testing.T) {
	rdb := testenv.RedisCluster(t)
	ctx := context.Background()
	for _, tc := range []struct {
		alg     Algorithm
		windows string
	}{{Log, "10/1m"}, {Log, "10/1m,20/1h"}, {Counter, "10/1m"}} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			l := newLimiter(t, rdb, tc.alg, tc.windows)
			prefix := testenv.Prefix(t)
			for trial := range 12 {
				id := fmt.Sprintf("%s-%d", prefix, trial)
				if n := concurrentAdmissions(t, l, id, 50); n != 10 {
					t.Fatalf("trial %d: admitted %d of 50 concurrent, want exactly 10", trial, n)
				}
			}
		})
	}
	t.Run("pipelined", func(t *testing.T) {
		ws, _ := ParseWindows("10/1m")
		l, err := New(rdb, map[string]Policy{"p": {Windows: ws, Algorithm: Log, Failure: FailClosed}}, Options{Timeout: time.Second, Pipeline: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		prefix := testenv.Prefix(t)
		for trial := range 6 {
			if n := concurrentAdmissions(t, l, fmt.Sprintf("%s-%d", prefix, trial), 50); n != 10 {
				t.Fatalf("trial %d: admitted %d of 50 concurrent, want exactly 10", trial, n)
			}
		}
	})
	t.Run("seed key and SCRIPT FLUSH", func(t *testing.T) {
		l := newLimiter(t, rdb, Log, "1/1s")
		id := "key:" + testenv.Prefix(t)
		for i := range 12 {
			if i == 5 {
				err := rdb.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
					return c.ScriptFlush(ctx).Err()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			d, err := l.Allow(ctx, "geofence", id, 1)
			if err != nil || d.Allowed != (i < 10) {
				t.Fatalf("request %d = %+v, %v", i, d, err)
			}
		}
		if n := rdb.ZCard(ctx, "rl:geofence:"+id).Val(); n != 10 {
			t.Errorf("ZCARD = %d, want 10", n)
		}
		if ttl := rdb.PTTL(ctx, "rl:geofence:"+id).Val(); ttl <= 0 || ttl > time.Second {
			t.Errorf("PTTL = %v, want in (0, 1s]", ttl)
		}
	})
}

// TestProcessesShareOneLimit runs three separate OS processes (this test
// binary re-executed), each firing 40 concurrent checks for the same
// identity at the same moment; between them they admit exactly the limit.
func TestProcessesShareOneLimit(t *testing.T) {
	url := testenv.Getenv(t, "TEST_REDIS_URL")
	for trial := range 2 {
		id := testenv.Prefix(t)
		start := time.Now().Add(700 * time.Millisecond).UnixMilli()
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for range 3 {
			// TestMain runs a worker instead of the tests in this process.
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), workerEnv+"="+id, "GEOGATE_RL_START="+strconv.FormatInt(start, 10), "TEST_REDIS_URL="+url)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		total := 0
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("worker %d: %v\n%s", i, err, outs[i])
			}
			_, after, ok := strings.Cut(outs[i].String(), "admitted=")
			n, err := strconv.Atoi(strings.Fields(after + " ")[0])
			if !ok || err != nil {
				t.Fatalf("worker %d printed no count:\n%s", i, outs[i])
			}
			total += n
		}
		if total != 25 {
			t.Fatalf("trial %d: three processes admitted %d in total, want exactly 25", trial, total)
		}
	}
}

// workerEnv names, in a process TestMain runs as a worker, the identity
// whose limit it competes for.
const workerEnv = "GEOGATE_RL_WORKER"

// worker is the body of one process of TestProcessesShareOneLimit: at the
// agreed moment it fires 40 concurrent checks for the identity and prints
// how many were admitted. It returns the process's exit status.
func worker(id string) int {
	start, _ := strconv.ParseInt(os.Getenv("GEOGATE_RL_START"), 10, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := rdb.Open(ctx, os.Getenv("TEST_REDIS_URL"), 5*time.Second)
	if err != nil {
		fmt.Println("worker:", err)
		return 1
	}
	defer rc.Close()
	ws, _ := ParseWindows("25/1m")
	l, err := New(rc, map[string]Policy{"p": {Name: "p", Windows: ws, Algorithm: Log, Failure: FailClosed}}, Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println("worker:", err)
		return 1
	}
	// Warm the connection pool so the burst is really concurrent, then
	// wait for the moment the three processes agreed on (pacing, not an
	// assertion).
	_ = rc.Ping(ctx).Err()
	time.Sleep(time.Until(time.UnixMilli(start))) // pacing: the agreed start of the burst
	n, err := admissions(l, id, 40)
	if err != nil {
		fmt.Println("worker:", err)
		return 1
	}
	fmt.Printf("admitted=%d\n", n)
	return 0
}

// TestClusterCalendarQuotas: on a three-master Cluster a policy's sliding
// windows and calendar quotas are decided in one script run whatever the
// identity holds (braces too: the quota counters share the log's slot),
// exactly under concurrency whichever window binds, across midnight on the
// caller clock, and read back exactly by Usage.
func TestClusterCalendarQuotas(t *testing.T) {
	rdb := testenv.RedisCluster(t)
	ctx := context.Background()
	// The slot the limiter computes is the Cluster's own.
	for _, key := range []string{"rl:p:key:demo", "rl:p:{x}y", "rl:p:a}b", quotaKey("rl:p:a}b", Day, "2026-03-10")} {
		want, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keySlot(key); int64(got) != want {
			t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT = %d", key, got, want)
		}
	}
	for _, tc := range []struct {
		alg     Algorithm
		windows string
		want    int
	}{
		{Log, "10/1m,15/1d@calendar", 10},
		{Log, "100/1m,12/1d@calendar,20/1mo@calendar", 12},
		{Counter, "100/1m,12/1d@calendar", 12},
		{Log, "9/1mo@calendar", 9},
	} {
		t.Run(string(tc.alg)+"/"+tc.windows, func(t *testing.T) {
			ls := replicaLimiters(t, rdb, 2, tc.alg, tc.windows)
			prefix := testenv.Prefix(t)
			for _, id := range []string{"key:" + prefix, "key:{" + prefix + "}", "key:" + prefix + "}x", "{}" + prefix} {
				if n := burst(t, ls, id, 40); n != tc.want {
					t.Errorf("identity %q: admitted %d of 40 concurrent, want exactly %d", id, n, tc.want)
				}
				if got := remaining(t, ls[0], id); slices.Min(got) != 0 {
					t.Errorf("identity %q: remaining after the burst %v, want a window at 0", id, got)
				}
				dropKeys(t, rdb, prefix)
			}
		})
	}
	t.Run("midnight", func(t *testing.T) {
		l := quotaLimiter(t, rdb, Log, "5/1h,3/1d@calendar", nil)
		id := "key:{" + testenv.Prefix(t) + "}"
		runSteps(t, l, id, []step{
			{at: "2026-03-10T23:59:58Z", cost: 3, allowed: true, remaining: []int{2, 0}},
			{at: "2026-03-10T23:59:59Z", cost: 1, allowed: false, retry: time.Second, violated: "p-1d@calendar", remaining: []int{2, 0}},
			{at: "2026-03-11T00:00:00Z", cost: 2, allowed: true, remaining: []int{0, 1}},
		})
	})
}
