package auth

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// propagation is how soon a change to a key must hold on every replica.
const propagation = time.Second

// replica is an Authenticator as New builds it for one process: a pool
// of its own on the shared database, a key cache whose TTL is far longer
// than any test, and its listener.
func replica(t *testing.T, dbURL string) *Authenticator {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 4, AppName: "geogate-replica", Schema: pg.DefaultSchema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a, err := New(ctx, Settings{KeyCacheTTL: time.Hour, KeyCacheSize: 1000, LookupTimeout: 5 * time.Second}, Deps{DB: pool})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.KeyEvents().Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("the key listener did not start within 15s")
	}
	return a
}

// verify authenticates a request carrying secret.
func verify(a *Authenticator, secret string) (Identity, error) {
	req, _ := http.NewRequest("GET", "/within", nil)
	req.Header.Set("x-api-key", secret)
	return a.Authenticate(context.Background(), req)
}

// TestKeyChangesReachEveryReplica: three replicas on one database have
// each cached a key (for an hour); a change made through a Store on
// another connection holds on all three within a second, through the
// notification alone.
func TestKeyChangesReachEveryReplica(t *testing.T) {
	ctx := context.Background()
	db, dbURL := testenv.DBWithURL(t)
	s := NewStore(db)
	replicas := []*Authenticator{replica(t, dbURL), replica(t, dbURL), replica(t, dbURL)}

	type check func(Identity, error) bool
	refused := func(id Identity, err error) bool { return apperr.KindOf(err) == apperr.Unauthenticated }
	accepted := func(id Identity, err error) bool { return err == nil }
	for _, tc := range []struct {
		name   string
		secret string
		before check
		change func(t *testing.T) string // returns the secret to try after
		after  check
	}{
		{
			name:   "Revoke",
			secret: mustCreate(t, s, CreateOptions{Key: Key{ID: "revoked", Scopes: AllScopes}}),
			before: accepted,
			change: func(t *testing.T) string {
				if err := s.Revoke(ctx, "revoked"); err != nil {
					t.Fatal(err)
				}
				return ""
			},
			after: refused,
		},
		{
			name:   "Scopes",
			secret: mustCreate(t, s, CreateOptions{Key: Key{ID: "scoped", Scopes: []string{ScopeTilesRead}}}),
			before: func(id Identity, err error) bool { return err == nil && !id.Has(ScopeAdmin) },
			change: func(t *testing.T) string {
				k, err := s.Get(ctx, "scoped")
				if err != nil {
					t.Fatal(err)
				}
				k.Scopes = []string{ScopeTilesRead, ScopeAdmin}
				if err := s.Update(ctx, k); err != nil {
					t.Fatal(err)
				}
				return ""
			},
			after: func(id Identity, err error) bool { return err == nil && id.Has(ScopeAdmin) },
		},
		{
			name:   "CreatedAfterAMiss",
			secret: "not-yet-a-key",
			before: refused,
			change: func(t *testing.T) string {
				mustCreate(t, s, CreateOptions{Key: Key{ID: "late", Scopes: AllScopes}, Secret: "not-yet-a-key"})
				return ""
			},
			after: accepted,
		},
		{
			name:   "RotatedWithoutGrace",
			secret: mustCreate(t, s, CreateOptions{Key: Key{ID: "rotated", Scopes: AllScopes}}),
			before: accepted,
			change: func(t *testing.T) string {
				if _, err := s.Rotate(ctx, "rotated", 0); err != nil {
					t.Fatal(err)
				}
				return ""
			},
			after: refused,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, a := range replicas {
				if id, err := verify(a, tc.secret); !tc.before(id, err) {
					t.Fatalf("replica %d before the change: %+v, %v", i, id, err)
				}
			}
			secret := tc.secret
			if s := tc.change(t); s != "" {
				secret = s
			}
			for i, a := range replicas {
				testenv.WaitFor(t, propagation, fmt.Sprintf("replica %d seeing the change", i), func() bool {
					return tc.after(verify(a, secret))
				})
			}
		})
	}
}

// TestKeyEventsReconnect: when the listener's connection is ended, a
// change made meanwhile still reaches the cache (flushed when the
// listener is back), and later changes are heard again.
func TestKeyEventsReconnect(t *testing.T) {
	ctx := context.Background()
	db, dbURL := testenv.DBWithURL(t)
	s := NewStore(db)
	a := replica(t, dbURL)
	first := mustCreate(t, s, CreateOptions{Key: Key{ID: "first", Scopes: AllScopes}})
	second := mustCreate(t, s, CreateOptions{Key: Key{ID: "second", Scopes: AllScopes}})
	for _, secret := range []string{first, second} {
		if _, err := verify(a, secret); err != nil {
			t.Fatal(err)
		}
	}
	before := listeners(t, db)
	if len(before) != 1 {
		t.Fatalf("listening backends = %v, want one", before)
	}
	if _, err := db.Exec(ctx, "SELECT pg_terminate_backend($1)", before[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the revocation made while the listener was cut off", func() bool {
		_, err := verify(a, first)
		return err != nil
	})
	testenv.WaitFor(t, 10*time.Second, "a new listening backend", func() bool {
		now := listeners(t, db)
		return len(now) == 1 && now[0] != before[0] && a.KeyEvents().Listening()
	})
	if err := s.Revoke(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, propagation, "a revocation after the reconnection", func() bool {
		_, err := verify(a, second)
		return err != nil
	})
}

// listeners returns the backends listening on KeyChannel in db's
// database, as the last statement they ran says.
func listeners(t *testing.T, db *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN '||$1 ORDER BY pid`, KeyChannel)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// blockingLookup answers each lookup once the test lets it.
type blockingLookup struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingLookup) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	b.started <- struct{}{}
	<-b.release
	return Key{ID: "k", Scopes: AllScopes}, nil
}

// TestForgetDuringLookup: a lookup that was under way when its key was
// forgotten may have read the key as it was before the change; its
// answer serves the request that asked but is not remembered.
func TestForgetDuringLookup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(*KeyCache)
		wantLen int
	}{
		{"Nothing", func(*KeyCache) {}, 1},
		{"Forget", func(c *KeyCache) { c.Forget("k") }, 0},
		{"ForgetOtherKey", func(c *KeyCache) { c.Forget("other") }, 0},
		{"Flush", func(c *KeyCache) { c.Flush() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &blockingLookup{started: make(chan struct{}), release: make(chan struct{})}
			c := NewKeyCache(b, time.Hour, 10)
			done := make(chan error, 1)
			go func() {
				_, err := c.Verify(context.Background(), "secret")
				done <- err
			}()
			<-b.started
			tc.between(c)
			close(b.release)
			if err := <-done; err != nil {
				t.Fatalf("Verify() = %v", err)
			}
			if got := c.Len(); got != tc.wantLen {
				t.Errorf("entries after the lookup = %d, want %d", got, tc.wantLen)
			}
		})
	}
}

// TestForgetDropsUnknownSecrets: Forget drops the key named under every
// secret and every unknown secret, and keeps other keys.
func TestForgetDropsUnknownSecrets(t *testing.T) {
	keys := map[[32]byte]Key{
		HashSecret("a1"): {ID: "a"}, HashSecret("a2"): {ID: "a"}, HashSecret("b1"): {ID: "b"},
	}
	c := NewKeyCache(lookupFunc(func(_ context.Context, h [32]byte) (Key, error) {
		if k, ok := keys[h]; ok {
			return k, nil
		}
		return Key{}, ErrKeyNotFound
	}), time.Hour, 10)
	for _, s := range []string{"a1", "a2", "b1", "unknown"} {
		_, _ = c.Verify(context.Background(), s)
	}
	c.Forget("a")
	var left []string
	c.mu.Lock()
	for _, e := range c.entries {
		left = append(left, e.key.ID)
	}
	c.mu.Unlock()
	if !slices.Equal(left, []string{"b"}) {
		t.Errorf("entries after Forget(a) = %q, want only b", left)
	}
}

type lookupFunc func(context.Context, [32]byte) (Key, error)

func (f lookupFunc) ByHash(ctx context.Context, h [32]byte) (Key, error) { return f(ctx, h) }
