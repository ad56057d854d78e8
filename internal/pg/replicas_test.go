package pg

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0/0", 0, true},
		{"0/3000000", 0x3000000, true},
		{"16/B374D848", 0x16<<32 | 0xB374D848, true},
		{"FFFFFFFF/FFFFFFFF", math.MaxUint64, true},
		{"16B374D848", 0, false},
		{"x/1", 0, false},
		{"1/100000000", 0, false},
	} {
		got, err := ParseLSN(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLSN(%q) = %x, %v; want %x, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestLagBound: a replica's lag is bounded by the newest sample of the
// primary its replay has passed; one behind every sample has no bound.
func TestLagBound(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := &Replicas{samples: []lsnSample{{t0, 100}, {t0.Add(200 * time.Millisecond), 100}, {t0.Add(400 * time.Millisecond), 250}, {t0.Add(600 * time.Millisecond), 300}}}
	now := t0.Add(700 * time.Millisecond)
	for _, tc := range []struct {
		replay uint64
		want   time.Duration
		ok     bool
	}{
		{300, 100 * time.Millisecond, true},
		{299, 300 * time.Millisecond, true},
		{250, 300 * time.Millisecond, true},
		{100, 500 * time.Millisecond, true},
		{99, 0, false},
	} {
		got, ok := r.lagOf(tc.replay, now)
		if ok != tc.ok || got != tc.want {
			t.Errorf("lagOf(%d) = %v, %v; want %v, %v", tc.replay, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPickHonoursTheFloor: a read goes to a healthy replica past its
// floor, in turn, and to the primary when none is.
func TestPickHonoursTheFloor(t *testing.T) {
	r := NewReplicas(nil, []*pgxpool.Pool{nil, nil}, []string{"a:1", "b:2"}, ReplicaOptions{MaxLag: time.Second})
	r.nodes[0].state.Store(&NodeState{Name: "a:1", Healthy: true, Replay: 500})
	r.nodes[1].state.Store(&NodeState{Name: "b:2", Healthy: true, Replay: 900})
	seen := map[string]int{}
	for range 10 {
		_, name := r.Pick(context.Background())
		seen[name]++
	}
	if seen["a:1"] != 5 || seen["b:2"] != 5 {
		t.Errorf("reads without a floor went to %v, want 5 and 5", seen)
	}
	for _, tc := range []struct {
		floor uint64
		want  string
	}{{600, "b:2"}, {900, "b:2"}, {901, ""}, {math.MaxUint64, ""}} {
		if _, got := r.Pick(WithMinLSN(context.Background(), tc.floor)); got != tc.want {
			t.Errorf("Pick with floor %d = %q, want %q", tc.floor, got, tc.want)
		}
	}
	r.Failed("b:2", context.DeadlineExceeded)
	if _, got := r.Pick(WithMinLSN(context.Background(), 600)); got != "" {
		t.Errorf("Pick after b:2 failed = %q, want the primary", got)
	}
}

// TestLazyFloor: a floor given as a func is looked up on the first pick
// only, and not at all by a request that never reads.
func TestLazyFloor(t *testing.T) {
	r := NewReplicas(nil, []*pgxpool.Pool{nil}, []string{"a:1"}, ReplicaOptions{MaxLag: time.Second})
	r.nodes[0].state.Store(&NodeState{Name: "a:1", Healthy: true, Replay: 500})
	calls := 0
	floor := func(lsn uint64) context.Context {
		return WithMinLSNFunc(context.Background(), func() uint64 { calls++; return lsn })
	}
	_ = floor(900)
	if calls != 0 {
		t.Fatalf("the floor was looked up %d times without a read", calls)
	}
	ctx := floor(900)
	for range 3 {
		if _, got := r.Pick(ctx); got != "" {
			t.Errorf("Pick under a floor past the replica = %q, want the primary", got)
		}
	}
	if calls != 1 {
		t.Errorf("the floor was looked up %d times for three picks, want 1", calls)
	}
}
