package ratelimit

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// When Redis returns, the units the in-process store admitted without it
// are handed over to Redis before Redis decides anything again, and the
// store forgets them. They are carried rather than ignored because they
// were admitted: a client that spent its limit in process just before the
// return would otherwise get it a second time from Redis in the same
// window, the database paying for both, and a calendar quota spent in
// process would be spent again over the rest of its day. Carried units
// only ever make Redis refuse sooner, never admit more. With several
// replicas each hands over its own, so a window may then hold more than
// the limit (the replicas did admit that much) and refuses until enough
// has left it.
//
// In-flight slots are not carried: they end with their requests, and a
// lease is short. A hand-over cut off by a failure after Redis applied
// some of its keys is tried again whole for the keys not yet confirmed,
// so a unit may be counted twice, which again only refuses sooner.

//go:embed carry.lua
var carryLua string

var carryScript = redis.NewScript(carryLua)

// handOverBatch is how many keys one round trip of a hand-over carries.
const handOverBatch = 256

// held is what the in-process store holds of one key.
type held struct {
	key   string
	kind  string // "log", "counter" or "quota"
	shard int    // the store's shard holding it (a quota's is its window's)
	// forget is when the store would have forgotten the key, in
	// milliseconds since the epoch.
	forget int64
	scores []int64            // log: the units' times, microseconds
	fields map[int64][3]int64 // counter: period ms -> bucket, cur, prev
	n      int64              // quota: units in the period
}

// args are carry.lua's arguments for h at now (milliseconds).
func (h held) args(now int64, member string) []any {
	args := []any{h.kind, now, h.forget}
	switch h.kind {
	case "log":
		args = append(args, member)
		for _, s := range h.scores {
			args = append(args, s)
		}
	case "counter":
		for p, f := range h.fields {
			args = append(args, strconv.FormatInt(p, 10), f[0], f[1], f[2])
		}
	case "quota":
		args = append(args, h.n)
	}
	return args
}

// handOver carries to Redis what the in-process store holds, a batch of
// keys per round trip. The breaker calls it holding its gate, so no
// decision changes the store meanwhile; on an error, the keys not yet
// carried stay for the next attempt.
func (l *Limiter) handOver(ctx context.Context) error {
	now := l.local.clock(l.at(time.Time{}))
	hs := l.local.held(now)
	for len(hs) > 0 {
		n := min(len(hs), handOverBatch)
		if err := l.carry(ctx, hs[:n], ceilDiv(now, 1000)); err != nil {
			return err
		}
		hs = hs[n:]
	}
	return nil
}

// carry hands over hs in one round trip; the store forgets each key Redis
// took.
func (l *Limiter) carry(ctx context.Context, hs []held, now int64) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	pipe := l.redis.c.Pipeline()
	cmds := make([]*redis.Cmd, len(hs))
	for i, h := range hs {
		// EVAL, not EVALSHA: a Redis back from a restart has no scripts.
		cmds[i] = carryScript.Eval(ctx, pipe, []string{h.key}, h.args(now, l.member())...)
	}
	_, err := pipe.Exec(ctx)
	for i, c := range cmds {
		if c.Err() == nil {
			l.local.forget(hs[i])
		}
	}
	return err
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// held returns what the store holds that has not expired at now
// (microseconds): the units it admitted, key by key.
func (s *localStore) held(now int64) []held {
	var out []held
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		from := len(out)
		out = sh.held(out, now)
		for j := from; j < len(out); j++ {
			out[j].shard = i
		}
		sh.mu.Unlock()
	}
	return out
}

func (sh *localShard) held(out []held, now int64) []held {
	for k, v := range sh.logs {
		if now < v.expires && len(v.scores) > 0 {
			out = append(out, held{key: k, kind: "log", forget: ceilDiv(v.expires, 1000), scores: append([]int64(nil), v.scores...)})
		}
	}
	for k, v := range sh.counters {
		if now/1000 < v.expires {
			fields := make(map[int64][3]int64, len(v.fields))
			for p, f := range v.fields {
				fields[p] = f
			}
			out = append(out, held{key: k, kind: "counter", forget: v.expires, fields: fields})
		}
	}
	for k, v := range sh.quotas {
		if now < v.expires && v.n > 0 {
			out = append(out, held{key: k, kind: "quota", forget: ceilDiv(v.expires, 1000), n: v.n})
		}
	}
	return out
}

// forget drops h's key from the store: Redis counts it now.
func (s *localStore) forget(h held) {
	sh := &s.shards[h.shard]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch h.kind {
	case "log":
		delete(sh.logs, h.key)
	case "counter":
		delete(sh.counters, h.key)
	case "quota":
		delete(sh.quotas, h.key)
	}
}
