package auth

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/geogate/geogate/internal/apperr"
)

// KeyLookup finds a key by the hash of its secret; *Store is one.
type KeyLookup interface {
	ByHash(ctx context.Context, h [32]byte) (Key, error)
}

// KeyCache verifies API keys through a KeyLookup, remembering each answer
// (found or not) for a short TTL, so that a busy key costs one hash and one
// map read per request, and a flood of random keys costs one lookup per
// key per TTL. A change to a key (a revocation) takes effect when Forget
// is called for it (see KeyEvents), and otherwise within the TTL; a key
// is never served past its own expiry. Concurrent misses for one secret
// share one lookup. Keys are held by the hash of their secret, never the
// secret.
type KeyCache struct {
	lookup KeyLookup
	ttl    time.Duration
	max    int
	now    func() time.Time
	sf     singleflight.Group
	// sem bounds concurrent lookups, so that a flood of distinct unknown
	// secrets queues here instead of taking the whole database pool.
	sem chan struct{}

	mu      sync.Mutex
	entries map[[32]byte]cacheEntry
	// gen counts Forget and Flush calls: a lookup that began before one
	// may have read what it dropped, so its answer is not remembered.
	gen uint64
}

type cacheEntry struct {
	key   Key
	found bool
	until time.Time
}

// MaxConcurrentLookups bounds the key lookups one KeyCache runs at once.
const MaxConcurrentLookups = 4

// NewKeyCache returns a cache over lookup holding at most max entries for
// ttl each.
func NewKeyCache(lookup KeyLookup, ttl time.Duration, max int) *KeyCache {
	if max < 1 {
		max = 1
	}
	return &KeyCache{
		lookup: lookup, ttl: ttl, max: max, now: time.Now,
		sem:     make(chan struct{}, MaxConcurrentLookups),
		entries: make(map[[32]byte]cacheEntry),
	}
}

// Verify returns the key for secret, or an Unauthenticated error when it is
// unknown, revoked or expired, or an Unavailable one when the lookup fails.
func (c *KeyCache) Verify(ctx context.Context, secret string) (Key, error) {
	h := HashSecret(secret)
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[h]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		v, err, _ := c.sf.Do(string(h[:]), func() (any, error) { return c.fill(ctx, h) })
		if err != nil {
			if apperr.KindOf(err) == apperr.Unauthenticated {
				return Key{}, err
			}
			return Key{}, apperr.Wrap(apperr.Unavailable, apperr.MessageOf(errKeyUnavailable), err)
		}
		e = v.(cacheEntry)
	}
	if !e.found {
		return Key{}, errInvalidKey
	}
	if err := e.key.Usable(now); err != nil {
		return Key{}, err
	}
	return e.key, nil
}

// fill looks h up and remembers the answer. Other requests may be waiting
// on this lookup, so it keeps the deadline of the request that started it
// but not its cancellation.
func (c *KeyCache) fill(ctx context.Context, h [32]byte) (cacheEntry, error) {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
		defer cancel()
	} else {
		ctx = context.WithoutCancel(ctx)
	}
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return cacheEntry{}, ctx.Err()
	}
	k, err := c.lookup.ByHash(ctx, h)
	found := true
	if errors.Is(err, ErrKeyNotFound) {
		found, err = false, nil
	}
	if err != nil {
		return cacheEntry{}, err
	}
	e := cacheEntry{key: k, found: found, until: c.now().Add(c.ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return e, nil // answers this request, but may predate a change
	}
	if len(c.entries) >= c.max {
		c.evict()
	}
	c.entries[h] = e
	return e, nil
}

// evict drops expired entries, then unknown secrets (so that a flood of
// random keys cannot push real keys out), then arbitrary ones (Go's map
// order), down to three quarters of the bound. c.mu is held.
func (c *KeyCache) evict() {
	now := c.now()
	target := c.max * 3 / 4
	for _, drop := range []func(cacheEntry) bool{
		func(e cacheEntry) bool { return !now.Before(e.until) },
		func(e cacheEntry) bool { return !e.found },
		func(cacheEntry) bool { return true },
	} {
		for h, e := range c.entries {
			if len(c.entries) <= target {
				return
			}
			if drop(e) {
				delete(c.entries, h)
			}
		}
	}
}

// Forget drops what the cache holds of key id, under any of its secrets,
// and every unknown secret (one may be a new secret of id), so that the
// next request with any of them reads the store.
func (c *KeyCache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.entries {
		if !e.found || e.key.ID == id {
			delete(c.entries, h)
		}
	}
}

// Flush drops every remembered answer.
func (c *KeyCache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.entries)
}

// Len returns the number of remembered answers.
func (c *KeyCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
