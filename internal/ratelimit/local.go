package ratelimit

import (
	"context"
	"hash/maphash"
	"slices"
	"sort"
	"sync"
	"time"
)

// localStore is the in-process twin of the Redis scripts: the same
// arithmetic on the same state, so that given the same sequence of (time,
// key, cost) it makes the same decisions. It serves the "local" failure
// mode and single-instance deployments; its limits hold per process.
type localStore struct {
	now    func() int64
	seed   maphash.Seed
	shards [64]localShard
}

type localShard struct {
	mu       sync.Mutex
	logs     map[string]*localLog
	counters map[string]*localCounter
	flights  map[string]*localFlight
	// quotas are the calendar quotas' counters, in the shard of the
	// sliding-window key they belong to.
	quotas map[string]*localQuota
	ops    int
}

type localQuota struct {
	n       int64
	expires int64
}

type localLog struct {
	scores  []int64 // ascending
	expires int64
}

type localCounter struct {
	fields  map[int64][3]int64 // period ms -> bucket, cur, prev
	expires int64              // milliseconds
}

type localFlight struct {
	leases  map[string]int64 // token -> lease end
	expires int64
}

func newLocalStore() *localStore {
	s := &localStore{now: func() int64 { return time.Now().UnixMicro() }, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i] = localShard{logs: map[string]*localLog{}, counters: map[string]*localCounter{}, flights: map[string]*localFlight{}, quotas: map[string]*localQuota{}}
	}
	return s
}

// shard locks and returns key's shard; every 4096 operations on a shard it
// drops the keys that have expired, as Redis would.
func (s *localStore) shard(key string, now int64) *localShard {
	sh := &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
	sh.mu.Lock()
	sh.ops++
	if sh.ops%4096 == 0 {
		sh.sweep(now)
	}
	return sh
}

func (sh *localShard) sweep(now int64) {
	for k, v := range sh.logs {
		if now >= v.expires {
			delete(sh.logs, k)
		}
	}
	for k, v := range sh.counters {
		if now/1000 >= v.expires {
			delete(sh.counters, k)
		}
	}
	for k, v := range sh.flights {
		if now >= v.expires {
			delete(sh.flights, k)
		}
	}
	for k, v := range sh.quotas {
		if now >= v.expires {
			delete(sh.quotas, k)
		}
	}
}

func (s *localStore) clock(at int64) int64 {
	if at != 0 {
		return at
	}
	return s.now()
}

func (s *localStore) decide(_ context.Context, alg Algorithm, key string, at int64, cost int, set *windowSet, _ string, _ *tally) (outcome, error) {
	now := s.clock(at)
	qs := quotas(key, set, now)
	sh := s.shard(key, now)
	defer sh.mu.Unlock()
	sliding := set.slide
	// The quotas' counts before the decision; nil: none.
	counts := sh.quotaCounts(qs, now)
	fits := func(cost int64) bool {
		for j, q := range qs {
			if counts[j]+cost > q.limit {
				return false
			}
		}
		return true
	}
	var o outcome
	if alg == Counter {
		o = sh.decideCounter(key, now, int64(cost), sliding, fits)
	} else {
		o = sh.decideLog(key, now, int64(cost), sliding, fits)
	}
	if o.admitted && cost > 0 {
		sh.chargeQuotas(qs, now, int64(cost))
	}
	o.windows = append(o.windows, quotaOutcomes(qs, counts, now, int64(cost), o.admitted)...)
	o.windows = inWindowOrder(o.windows, set, qs)
	return o, nil
}

// quotaCounts returns what each quota's counter holds at now.
func (sh *localShard) quotaCounts(qs []quota, now int64) []int64 {
	if len(qs) == 0 {
		return nil
	}
	counts := make([]int64, len(qs))
	for j, q := range qs {
		if c := sh.quotas[q.key]; c != nil && now < c.expires {
			counts[j] = c.n
		}
	}
	return counts
}

// chargeQuotas adds cost to each quota's counter, which lives until its
// period ends plus quotaGrace, as in the scripts.
func (sh *localShard) chargeQuotas(qs []quota, now, cost int64) {
	for _, q := range qs {
		c := sh.quotas[q.key]
		if c == nil || now >= c.expires {
			c = &localQuota{}
			sh.quotas[q.key] = c
		}
		c.n += cost
		// PEXPIRE in milliseconds, rounded up, as the scripts set it.
		c.expires = now + (max(0, q.end-now)+999)/1000*1000 + quotaGrace.Microseconds()
	}
}

// quotaOutcomes mirrors the quota part of the scripts' answers.
func quotaOutcomes(qs []quota, counts []int64, now, cost int64, admitted bool) []windowOutcome {
	out := make([]windowOutcome, len(qs))
	for j, q := range qs {
		wo := windowOutcome{used: counts[j], reset: max(0, q.end-now)}
		if admitted {
			wo.used += cost
		}
		if !admitted && cost <= q.limit && counts[j]+cost > q.limit {
			wo.retry = max(1, wo.reset)
		}
		out[j] = wo
	}
	return out
}

// decideLog mirrors log.lua for the sliding windows ws; quotasFit says
// whether the calendar quotas have room for a cost.
func (sh *localShard) decideLog(key string, now, cost int64, ws []Window, quotasFit func(int64) bool) outcome {
	o := outcome{now: now, windows: make([]windowOutcome, len(ws))}
	if len(ws) == 0 {
		o.admitted = quotasFit(cost)
		return o
	}
	l := sh.logs[key]
	if l == nil || now >= l.expires {
		l = &localLog{}
	}
	var long int64
	for _, w := range ws {
		long = max(long, w.Period.Microseconds())
	}
	// Drop scores <= now - longest.
	cut := sort.Search(len(l.scores), func(i int) bool { return l.scores[i] > now-long })
	l.scores = slices.Delete(l.scores, 0, cut)
	total := int64(len(l.scores))
	counts := make([]int64, len(ws))
	admitted := quotasFit(cost)
	for i, w := range ws {
		p := w.Period.Microseconds()
		first := sort.Search(len(l.scores), func(j int) bool { return l.scores[j] > now-p })
		counts[i] = total - int64(first)
		if counts[i]+cost > int64(w.Limit) {
			admitted = false
		}
	}
	if admitted && cost > 0 {
		pos := sort.Search(len(l.scores), func(j int) bool { return l.scores[j] > now })
		l.scores = slices.Insert(l.scores, pos, slices.Repeat([]int64{now}, int(cost))...)
		total += cost
		l.expires = now + long
		sh.logs[key] = l
	}
	o.admitted = admitted
	for i, w := range ws {
		p := w.Period.Microseconds()
		used := counts[i]
		if admitted {
			used += cost
		}
		var wo windowOutcome
		wo.used = used
		if used > 0 {
			wo.reset = l.scores[total-used] + p - now
		}
		if !admitted && cost <= int64(w.Limit) && counts[i]+cost > int64(w.Limit) {
			k := counts[i] + cost - int64(w.Limit)
			wo.retry = l.scores[total-counts[i]+k-1] + p - now
		}
		o.windows[i] = wo
	}
	return o
}

// counterState is one window of the counter approximation, in
// milliseconds, as in counter.lua.
type counterState struct {
	limit, period, bucket, cur, prev, e int64
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (s counterState) fits(k int64) bool {
	return k <= s.limit && s.prev*(s.period-s.e)+(s.cur+k)*s.period <= s.limit*s.period
}

// fitsAt returns the first millisecond at which cost k fits, or -1 when
// it fits now or never can.
func (s counterState) fitsAt(k int64) int64 {
	if k > s.limit || s.fits(k) {
		return -1
	}
	if s.cur+k <= s.limit {
		return s.bucket*s.period + s.period - floorDiv((s.limit-k-s.cur)*s.period, s.prev)
	}
	return (s.bucket+1)*s.period + s.period - floorDiv((s.limit-k)*s.period, s.cur)
}

// decideCounter mirrors counter.lua for the sliding windows ws; quotasFit
// says whether the calendar quotas have room for a cost.
func (sh *localShard) decideCounter(key string, nowus, cost int64, ws []Window, quotasFit func(int64) bool) outcome {
	if len(ws) == 0 {
		return outcome{admitted: quotasFit(cost), now: nowus, windows: []windowOutcome{}}
	}
	now := floorDiv(nowus, 1000)
	var longest int64
	for _, w := range ws {
		longest = max(longest, w.Period.Milliseconds())
	}
	// expires is when the stored state is forgotten; 0 while none is.
	var expires int64
	c := sh.counters[key]
	if c == nil || now >= c.expires {
		c = &localCounter{fields: map[int64][3]int64{}}
	} else {
		expires = c.expires
	}
	after := func(at int64) int64 {
		if at < 0 {
			return 0
		}
		if expires != 0 && at > expires {
			at = expires
		}
		return at*1000 - nowus
	}
	states := make([]counterState, len(ws))
	admitted := quotasFit(cost)
	for i, w := range ws {
		s := counterState{limit: int64(w.Limit), period: w.Period.Milliseconds()}
		s.bucket = floorDiv(now, s.period)
		if f, ok := c.fields[s.period]; ok {
			if f[0] >= s.bucket {
				s.bucket, s.cur, s.prev = f[0], f[1], f[2]
			} else if f[0] == s.bucket-1 {
				s.prev = f[1]
			}
		}
		s.e = max(0, now-s.bucket*s.period)
		if !s.fits(cost) {
			admitted = false
		}
		states[i] = s
	}
	if admitted && cost > 0 {
		for i := range states {
			s := &states[i]
			s.cur += cost
			c.fields[s.period] = [3]int64{s.bucket, s.cur, s.prev}
		}
		expires = now + longest
		c.expires = expires
		sh.counters[key] = c
	}
	o := outcome{admitted: admitted, now: nowus, windows: make([]windowOutcome, len(ws))}
	for i, s := range states {
		left := max(0, floorDiv(s.limit*s.period-s.prev*(s.period-s.e)-s.cur*s.period, s.period))
		var wo windowOutcome
		wo.used = s.limit - left
		if left > 0 {
			wo.reset = after((s.bucket + 1) * s.period)
		} else {
			wo.reset = after(s.fitsAt(1))
		}
		if !admitted {
			wo.retry = after(s.fitsAt(cost))
		}
		o.windows[i] = wo
	}
	return o
}

func (s *localStore) acquire(_ context.Context, key string, at int64, max int, lease time.Duration, token string) (bool, int, error) {
	now := s.clock(at)
	sh := s.shard(key, now)
	defer sh.mu.Unlock()
	f := sh.flights[key]
	if f == nil || now >= f.expires {
		f = &localFlight{leases: map[string]int64{}}
	}
	for t, end := range f.leases {
		if end <= now {
			delete(f.leases, t)
		}
	}
	if len(f.leases) >= max {
		return false, len(f.leases), nil
	}
	f.leases[token] = now + lease.Microseconds()
	f.expires = now + lease.Microseconds()
	sh.flights[key] = f
	return true, len(f.leases), nil
}

func (s *localStore) release(_ context.Context, key, token string) error {
	sh := s.shard(key, s.now())
	defer sh.mu.Unlock()
	if f := sh.flights[key]; f != nil {
		delete(f.leases, token)
	}
	return nil
}

func (s *localStore) inFlight(_ context.Context, key string, at int64) (int, error) {
	now := s.clock(at)
	sh := s.shard(key, now)
	defer sh.mu.Unlock()
	n := 0
	if f := sh.flights[key]; f != nil && now < f.expires {
		for _, end := range f.leases {
			if end > now {
				n++
			}
		}
	}
	return n, nil
}
