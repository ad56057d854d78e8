package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Replicas routes reads to PostgreSQL streaming replicas that are
// reachable and whose replay is recent enough, and to the primary
// otherwise.
//
// Lag is bounded, not estimated: every check interval the primary's WAL
// insert position is sampled with the time. A replica whose replay
// position has passed the sample taken at t holds every transaction
// committed before t, so its data is at most now - t old; the newest such
// sample gives the bound. A caller that has written asks for a replica
// whose replay has passed its write's position (MinLSN); none is good
// enough, the read goes to the primary.
type Replicas struct {
	primary *pgxpool.Pool
	nodes   []*node
	maxLag  time.Duration
	every   time.Duration
	log     *slog.Logger
	next    atomic.Uint64 // round robin

	mu      sync.Mutex
	samples []lsnSample // the primary's positions, oldest first

	routed, away *prometheus.CounterVec
}

// Register adds the replicas' metrics to reg.
func (r *Replicas) Register(reg prometheus.Registerer) {
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "geogate_db_replica_lag_seconds",
		Help: "The bound on how old each replica's data is, from its replay position and the primary's samples; +Inf when unknown.",
	}, []string{"replica"})
	reg.MustRegister(r.routed, r.away, &lagCollector{r: r, desc: lag}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "geogate_db_replicas_healthy",
		Help: "Replicas getting reads now.",
	}, func() float64 {
		n := 0
		for _, s := range r.States() {
			if s.Healthy {
				n++
			}
		}
		return float64(n)
	}))
}

type lsnSample struct {
	at  time.Time
	lsn uint64
}

// node is one replica and what its last check found.
type node struct {
	name string // host:port
	pool *pgxpool.Pool
	// state is the last check's finding, swapped whole.
	state  atomic.Pointer[NodeState]
	routed prometheus.Counter
	away   prometheus.Counter
}

// NodeState is what the last check of a replica found.
type NodeState struct {
	Name    string        `json:"name"`
	Healthy bool          `json:"healthy"`
	Lag     time.Duration `json:"-"`
	// LagSeconds is Lag for JSON; null when unknown.
	LagSeconds *float64 `json:"lag_seconds"`
	Replay     uint64   `json:"-"`
	Reason     string   `json:"reason,omitempty"`
}

// ReplicaOptions configure Replicas.
type ReplicaOptions struct {
	// MaxLag is the oldest a replica's data may be for it to get reads.
	MaxLag time.Duration
	// Check is how often each replica and the primary are looked at.
	Check time.Duration
	Log   *slog.Logger
}

// NewReplicas routes reads among pools (opened on the replicas' URLs,
// named by names) and primary. Run keeps their states current.
func NewReplicas(primary *pgxpool.Pool, pools []*pgxpool.Pool, names []string, o ReplicaOptions) *Replicas {
	if o.Check <= 0 {
		o.Check = 200 * time.Millisecond
	}
	r := &Replicas{primary: primary, maxLag: o.MaxLag, every: o.Check, log: o.Log}
	r.routed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "geogate_db_replica_reads_total",
		Help: "Reads routed to each replica.",
	}, []string{"replica"})
	r.away = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "geogate_db_replica_reads_turned_away_total",
		Help: "Reads that would have gone to a replica but went to the primary: unhealthy, too far behind, or not yet past the caller's own write.",
	}, []string{"replica"})
	for i, p := range pools {
		n := &node{name: names[i], pool: p, routed: r.routed.WithLabelValues(names[i]), away: r.away.WithLabelValues(names[i])}
		n.state.Store(&NodeState{Name: names[i], Reason: "not checked yet"})
		r.nodes = append(r.nodes, n)
	}
	return r
}

// lagCollector reports each replica's lag bound at scrape time.
type lagCollector struct {
	r    *Replicas
	desc *prometheus.GaugeVec
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { c.desc.Describe(ch) }
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.r.States() {
		v := s.Lag.Seconds()
		if s.LagSeconds == nil {
			v = inf
		}
		c.desc.WithLabelValues(s.Name).Set(v)
	}
	c.desc.Collect(ch)
}

var inf = math.Inf(1)

// Primary is the primary's pool.
func (r *Replicas) Primary() *pgxpool.Pool { return r.primary }

// States returns each replica's last check, in configuration order.
func (r *Replicas) States() []NodeState {
	out := make([]NodeState, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = *n.state.Load()
	}
	return out
}

type minLSNKey struct{}

// WithMinLSN asks reads under ctx to see at least the WAL position lsn
// (a write's, for its writer's later reads). math.MaxUint64 sends them to
// the primary.
func WithMinLSN(ctx context.Context, lsn uint64) context.Context {
	if lsn == 0 {
		return ctx
	}
	return context.WithValue(ctx, minLSNKey{}, lsn)
}

// WithMinLSNFunc is WithMinLSN with the position looked up by f, once,
// on the first read under ctx that could go to a replica: a request that
// never reads (a cached tile) never pays for the look-up.
func WithMinLSNFunc(ctx context.Context, f func() uint64) context.Context {
	return context.WithValue(ctx, minLSNKey{}, sync.OnceValue(f))
}

func minLSN(ctx context.Context) uint64 {
	switch v := ctx.Value(minLSNKey{}).(type) {
	case uint64:
		return v
	case func() uint64:
		return v()
	}
	return 0
}

// Pick returns the pool a read under ctx goes to: a healthy replica past
// the read's minimum position, taken in turn, else the primary. replica
// says which it was ("" for the primary).
func (r *Replicas) Pick(ctx context.Context) (pool *pgxpool.Pool, replica string) {
	if r == nil || len(r.nodes) == 0 {
		return r.primaryOrNil(), ""
	}
	want := minLSN(ctx)
	start := r.next.Add(1)
	for i := range r.nodes {
		n := r.nodes[(start+uint64(i))%uint64(len(r.nodes))]
		if s := n.state.Load(); s.Healthy && s.Replay >= want {
			n.routed.Inc()
			return n.pool, n.name
		}
	}
	r.nodes[start%uint64(len(r.nodes))].away.Inc()
	return r.primary, ""
}

// Read runs fn on the pool Pick chooses for ctx, or on primary when r is
// nil or no replica qualifies. When the replica proves unreachable before
// fn's statement reached it (no connection, or nothing sent), it is
// marked so and fn runs again on primary; a replica lost while it runs
// the statement fails the read, as the primary would. fn must start
// afresh each time it is called.
func (r *Replicas) Read(ctx context.Context, primary *pgxpool.Pool, fn func(*pgxpool.Pool) error) error {
	pool, replica := r.Pick(ctx)
	if replica == "" {
		return fn(primary)
	}
	err := fn(pool)
	if err != nil && ctx.Err() == nil && IsConnectErr(err) {
		r.Failed(replica, err)
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) || pgconn.SafeToRetry(err) {
			return fn(primary)
		}
	}
	return err
}

func (r *Replicas) primaryOrNil() *pgxpool.Pool {
	if r == nil {
		return nil
	}
	return r.primary
}

// Failed marks the replica named by replica unhealthy at once, after a
// read on it found it unreachable; the next check may bring it back.
func (r *Replicas) Failed(replica string, err error) {
	for _, n := range r.nodes {
		if n.name == replica {
			n.state.Store(&NodeState{Name: n.name, Reason: "unreachable: " + firstLine(err.Error())})
		}
	}
}

// CurrentLSN is the primary's WAL insert position now: at or past the
// commit of every transaction that committed before the call.
func (r *Replicas) CurrentLSN(ctx context.Context) (uint64, error) {
	return insertLSN(ctx, r.primary)
}

func insertLSN(ctx context.Context, p *pgxpool.Pool) (uint64, error) {
	var s string
	if err := p.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return 0, err
	}
	return ParseLSN(s)
}

// ParseLSN reads an LSN written as PostgreSQL writes it, "16/B374D848".
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("not an LSN: %q", s)
	}
	return h<<32 | l, nil
}

// Run checks the primary and every replica each interval until ctx ends.
func (r *Replicas) Run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		r.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check samples the primary's position, then each replica's replay.
func (r *Replicas) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, r.every*4)
	defer cancel()
	now := time.Now()
	if lsn, err := insertLSN(cctx, r.primary); err == nil {
		r.mu.Lock()
		r.samples = append(r.samples, lsnSample{at: now, lsn: lsn})
		// Older samples than the lag allowed can never make a replica good.
		for len(r.samples) > 1 && now.Sub(r.samples[1].at) > r.maxLag+r.every {
			r.samples = r.samples[1:]
		}
		r.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() { n.state.Store(r.checkNode(cctx, n)) })
	}
	wg.Wait()
}

func (r *Replicas) checkNode(ctx context.Context, n *node) *NodeState {
	var replay string
	var recovering bool
	err := n.pool.QueryRow(ctx, "SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn()::text, '0/0')").Scan(&recovering, &replay)
	if err != nil {
		return &NodeState{Name: n.name, Reason: "unreachable: " + firstLine(err.Error())}
	}
	lsn, err := ParseLSN(replay)
	if err != nil || !recovering {
		// A promoted replica is a primary of its own now: reading it could
		// miss writes made on the real primary since.
		return &NodeState{Name: n.name, Reason: "not a standby in recovery"}
	}
	now := time.Now()
	lag, ok := r.lagOf(lsn, now)
	switch {
	case !ok:
		return &NodeState{Name: n.name, Replay: lsn, Reason: "behind every sample of the primary"}
	case lag > r.maxLag:
		secs := lag.Seconds()
		return &NodeState{Name: n.name, Replay: lsn, Lag: lag, LagSeconds: &secs, Reason: "lag above DB_REPLICA_MAX_LAG"}
	}
	secs := lag.Seconds()
	return &NodeState{Name: n.name, Healthy: true, Replay: lsn, Lag: lag, LagSeconds: &secs}
}

// lagOf bounds how old a replica that replayed up to lsn is at now.
func (r *Replicas) lagOf(lsn uint64, now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.samples) - 1; i >= 0; i-- {
		if r.samples[i].lsn <= lsn {
			return now.Sub(r.samples[i].at), true
		}
	}
	return 0, false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
