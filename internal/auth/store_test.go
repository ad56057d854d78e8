package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

func mustCreate(t *testing.T, s *Store, o CreateOptions) string {
	t.Helper()
	secret, err := s.Create(context.Background(), o)
	if err != nil {
		t.Fatalf("Create(%s) = %v", o.ID, err)
	}
	return secret
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s := NewStore(testenv.DB(t))
	scope, _ := spatial.Parse([]byte(`{"type":"Polygon","coordinates":[[[13,52],[14,52],[14,53],[13,53],[13,52]]]}`))
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)

	gen := mustCreate(t, s, CreateOptions{Key: Key{ID: "gen", Scopes: []string{ScopeTilesRead}, Tier: "gold", Spatial: scope, ExpiresAt: &exp, Notes: "n"}})
	if !strings.HasPrefix(gen, "gg_gen_") || len(gen) != len("gg_gen_")+43 {
		t.Errorf("generated secret = %q, want gg_gen_ and 43 characters", gen)
	}
	mustCreate(t, s, CreateOptions{Key: Key{ID: "demo", Scopes: AllScopes}, Secret: "demo"})

	t.Run("ByHash", func(t *testing.T) {
		k, err := s.ByHash(ctx, HashSecret(gen))
		if err != nil {
			t.Fatal(err)
		}
		if k.ID != "gen" || k.Tier != "gold" || k.Notes != "n" || k.Spatial.Hash() != scope.Hash() || k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp) || k.RevokedAt != nil {
			t.Errorf("ByHash(gen) = %+v, want the key as created", k)
		}
		if _, err := s.ByHash(ctx, HashSecret("nope")); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("ByHash(unknown) = %v, want ErrKeyNotFound", err)
		}
	})
	t.Run("ErrKeyExists", func(t *testing.T) {
		_, err := s.Create(ctx, CreateOptions{Key: Key{ID: "demo", Scopes: AllScopes}})
		if !errors.Is(err, ErrKeyExists) {
			t.Errorf("Create(existing id) = %v, want ErrKeyExists", err)
		}
	})
	t.Run("ErrSecretInUse", func(t *testing.T) {
		_, err := s.Create(ctx, CreateOptions{Key: Key{ID: "other", Scopes: AllScopes}, Secret: "demo"})
		if !errors.Is(err, ErrSecretInUse) {
			t.Errorf("Create(same secret) = %v, want ErrSecretInUse", err)
		}
	})
	t.Run("ErrBadID", func(t *testing.T) {
		for _, id := range []string{"", "-x", "a b", strings.Repeat("a", 65), "ü"} {
			if _, err := s.Create(ctx, CreateOptions{Key: Key{ID: id}}); apperr.KindOf(err) != apperr.Invalid {
				t.Errorf("Create(id %q) = %v, want Invalid", id, err)
			}
		}
	})
	t.Run("RevokeAndReplace", func(t *testing.T) {
		if err := s.Revoke(ctx, "demo"); err != nil {
			t.Fatal(err)
		}
		k, _ := s.ByHash(ctx, HashSecret("demo"))
		if k.Usable(time.Now()) == nil {
			t.Errorf("revoked key is usable")
		}
		if err := s.Revoke(ctx, "missing"); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("Revoke(missing) = %v, want ErrKeyNotFound", err)
		}
		mustCreate(t, s, CreateOptions{Key: Key{ID: "demo", Scopes: []string{ScopeTilesRead}}, Secret: "demo2", Replace: true})
		if _, err := s.ByHash(ctx, HashSecret("demo")); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("old secret after replace: %v, want ErrKeyNotFound", err)
		}
		k, err := s.ByHash(ctx, HashSecret("demo2"))
		if err != nil || k.RevokedAt != nil || len(k.Scopes) != 1 {
			t.Errorf("after replace = %+v, %v; want active with one scope", k, err)
		}
	})
	t.Run("List", func(t *testing.T) {
		keys, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range keys {
			ids = append(ids, k.ID)
		}
		if got, want := strings.Join(ids, ","), "demo,gen"; got != want {
			t.Errorf("List ids = %s, want %s", got, want)
		}
	})
}

// countingStore counts lookups that reach the database.
type countingStore struct {
	*Store
	n atomic.Int32
}

func (c *countingStore) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	c.n.Add(1)
	return c.Store.ByHash(ctx, h)
}

func TestAPIKeys(t *testing.T) {
	s := NewStore(testenv.DB(t))
	past := time.Now().Add(-time.Minute)
	berlin, _ := spatial.NewBBox(13, 52, 14, 53)
	paris, _ := spatial.NewBBox(2, 48, 3, 49)
	mustCreate(t, s, CreateOptions{Key: Key{ID: "demo", Scopes: AllScopes, Tier: "gold"}, Secret: "demo"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "tiles", Scopes: []string{ScopeTilesRead}}, Secret: "tiles-secret"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "old", Scopes: AllScopes, ExpiresAt: &past}, Secret: "old-secret"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "gone", Scopes: AllScopes}, Secret: "gone-secret"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "berlin", Scopes: AllScopes, Spatial: berlin}, Secret: "berlin-secret"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "paris", Scopes: AllScopes, Spatial: paris}, Secret: "paris-secret"})
	if err := s.Revoke(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	h := testRouter(NewAuthenticator(Options{Keys: NewKeyCache(s, time.Second, 100)}))

	for _, tc := range []struct{ name, secret, wantKey string }{
		{"Demo", "demo", "key:demo"},
		{"InsideSpatialScope", "berlin-secret", "key:berlin"},
	} {
		t.Run("OK/"+tc.name, func(t *testing.T) {
			res := do(t, h, "GET", "/within", map[string]string{"x-api-key": tc.secret}, "")
			if res.status != 200 || !strings.Contains(res.body, `"limit_key":"`+tc.wantKey+`"`) {
				t.Fatalf("GET /within = %d %s, want 200 with %s", res.status, res.body, tc.wantKey)
			}
			if strings.Contains(res.body, tc.secret+`"`) && tc.secret != tc.wantKey[4:] {
				t.Errorf("body leaks the secret: %s", res.body)
			}
		})
	}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		wantStatus         int
		wantDetail         string
	}{
		{"Missing", "POST", "/geofences", nil, 401, "Authentication required"},
		{"Unknown", "GET", "/within", map[string]string{"x-api-key": "not-a-key"}, 401, "not valid"},
		{"Revoked", "GET", "/within", map[string]string{"x-api-key": "gone-secret"}, 401, "not valid"},
		{"Expired", "GET", "/within", map[string]string{"x-api-key": "old-secret"}, 401, "expired"},
		{"Malformed/Space", "GET", "/within", map[string]string{"x-api-key": "a b"}, 401, "malformed"},
		{"Malformed/Empty", "GET", "/within", map[string]string{"x-api-key": ""}, 401, "malformed"},
		{"Malformed/Long", "GET", "/within", map[string]string{"x-api-key": strings.Repeat("k", 300)}, 401, "malformed"},
		{"MissingScope", "GET", "/within", map[string]string{"x-api-key": "tiles-secret"}, 403, "proximity:read"},
		{"MissingWriteScope", "POST", "/geofences", map[string]string{"x-api-key": "tiles-secret"}, 403, "geofences:write"},
		{"OutsideSpatialScope", "GET", "/within", map[string]string{"x-api-key": "paris-secret"}, 403, "leaves your spatial scope"},
		{"BothCredentials", "GET", "/within", map[string]string{"x-api-key": "demo", "Authorization": "Bearer a.b.c"}, 401, "not both"},
	} {
		t.Run("Reject/"+tc.name, func(t *testing.T) {
			res := do(t, h, tc.method, tc.path, tc.header, "")
			var secrets []string
			for _, v := range tc.header {
				if len(v) > 4 {
					secrets = append(secrets, v)
				}
			}
			checkRejection(t, res, tc.wantStatus, tc.wantDetail, secrets...)
		})
	}
	t.Run("Reject/TwoKeyHeaders", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "/within", nil)
		req.Header.Add("x-api-key", "demo")
		req.Header.Add("x-api-key", "tiles-secret")
		_, err := NewAuthenticator(Options{Keys: NewKeyCache(s, time.Second, 10)}).Authenticate(context.Background(), req)
		if apperr.KindOf(err) != apperr.Unauthenticated {
			t.Errorf("Authenticate(two x-api-key headers) = %v, want Unauthenticated", err)
		}
	})
}

// TestRevokeTakesEffectWithinTTL: a revoked key keeps working at most for
// the cache TTL; a key created after its secret was tried works after the
// TTL too; lookups are cached both ways. The cache runs on a clock of the
// test's, the real time plus an offset the test moves forward: the TTL
// passes when the test says, and the cache's time never falls behind the
// database's, which stamps the revocation.
func TestRevokeTakesEffectWithinTTL(t *testing.T) {
	ctx := context.Background()
	const ttl = 400 * time.Millisecond
	cs := &countingStore{Store: NewStore(testenv.DB(t))}
	mustCreate(t, cs.Store, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret"})
	cache := NewKeyCache(cs, ttl, 100)
	var offset time.Duration // only the test's goroutine calls the cache
	cache.now = func() time.Time { return time.Now().Add(offset) }

	for i := 0; i < 50; i++ {
		if _, err := cache.Verify(ctx, "k-secret"); err != nil {
			t.Fatalf("Verify(k) = %v", err)
		}
	}
	if got := cs.n.Load(); got != 1 {
		t.Errorf("lookups for 50 verifications = %d, want 1", got)
	}
	if err := cs.Revoke(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// One TTL after the lookup (and the few milliseconds the test took
	// since), the cached answer is gone and the revocation seen.
	offset += ttl
	if _, err := cache.Verify(ctx, "k-secret"); apperr.KindOf(err) != apperr.Unauthenticated {
		t.Errorf("Verify(revoked) one TTL (%v) after the lookup = %v, want Unauthenticated", ttl, err)
	}
	if got := cs.n.Load(); got != 2 {
		t.Errorf("lookups after the TTL = %d, want 2", got)
	}

	// Negative answers are cached too, and expire.
	before := cs.n.Load()
	for i := 0; i < 50; i++ {
		_, _ = cache.Verify(ctx, "later-secret")
	}
	if got := cs.n.Load() - before; got != 1 {
		t.Errorf("lookups for 50 unknown verifications = %d, want 1", got)
	}
	mustCreate(t, cs.Store, CreateOptions{Key: Key{ID: "later", Scopes: AllScopes}, Secret: "later-secret"})
	offset += ttl
	if _, err := cache.Verify(ctx, "later-secret"); err != nil {
		t.Errorf("Verify(created after a miss, after TTL) = %v, want nil", err)
	}
}

func TestKeyCacheConcurrentMissesShareOneLookup(t *testing.T) {
	cs := &countingStore{Store: NewStore(testenv.DB(t))}
	mustCreate(t, cs.Store, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret"})
	cache := NewKeyCache(cs, time.Minute, 100)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cache.Verify(context.Background(), "k-secret"); err != nil {
				t.Errorf("Verify = %v", err)
			}
		}()
	}
	wg.Wait()
	if got := cs.n.Load(); got > 4 {
		t.Errorf("lookups for 32 concurrent first verifications = %d, want a few at most", got)
	}
}

func TestKeyCacheBounded(t *testing.T) {
	cs := &countingStore{Store: NewStore(testenv.DB(t))}
	mustCreate(t, cs.Store, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret"})
	cache := NewKeyCache(cs, time.Minute, 16)
	ctx := context.Background()
	if _, err := cache.Verify(ctx, "k-secret"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		_, _ = cache.Verify(ctx, fmt.Sprintf("random-%d", i))
		if n := cache.Len(); n > 16 {
			t.Fatalf("cache holds %d entries, bound 16", n)
		}
	}
	// Random secrets were evicted before the real key.
	before := cs.n.Load()
	if _, err := cache.Verify(ctx, "k-secret"); err != nil {
		t.Fatal(err)
	}
	if cs.n.Load() != before {
		t.Errorf("a flood of unknown secrets pushed the real key out of the cache")
	}
}

func TestKeyStoreDown(t *testing.T) {
	pool := testenv.DB(t)
	s := NewStore(pool)
	mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret"})
	pool.Close()
	h := testRouter(NewAuthenticator(Options{Keys: NewKeyCache(s, time.Second, 10)}))
	res := do(t, h, "GET", "/within", map[string]string{"x-api-key": "k-secret"}, "")
	checkRejection(t, res, http.StatusServiceUnavailable, "cannot be verified", "k-secret")
}

// gatedStore holds every lookup until released and records how many ran
// at once; then it finds no key.
type gatedStore struct {
	release        chan struct{}
	inFlight, peak atomic.Int32
}

func (g *gatedStore) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	<-g.release
	return Key{}, ErrKeyNotFound
}

// TestKeyCacheBoundsConcurrentLookups runs in a synctest bubble:
// synctest.Wait returns once every caller is blocked, either in a lookup
// or waiting for a turn, so the count in flight is the final one.
func TestKeyCacheBoundsConcurrentLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedStore{release: make(chan struct{})}
		cache := NewKeyCache(g, time.Minute, 100)
		var wg sync.WaitGroup
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = cache.Verify(context.Background(), fmt.Sprintf("unknown-%d", i))
			}()
		}
		synctest.Wait()
		if got := g.inFlight.Load(); got != MaxConcurrentLookups {
			t.Errorf("lookups in flight with 12 callers blocked = %d, want %d", got, MaxConcurrentLookups)
		}
		close(g.release)
		wg.Wait()
		if got := g.peak.Load(); got > MaxConcurrentLookups {
			t.Errorf("peak concurrent lookups = %d, want at most %d", got, MaxConcurrentLookups)
		}
	})
}

// TestKeyLayers: a key's layers are stored, listed and loaded as given,
// reach the Identity of a request made with the key, and can be replaced;
// a key created without layers may read every layer (nil, stored NULL).
func TestKeyLayers(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	s := NewStore(db)
	some := []string{"places", "transit__*"}
	mustCreate(t, s, CreateOptions{Key: Key{ID: "some", Scopes: AllScopes, Layers: some}, Secret: "some-secret"})
	mustCreate(t, s, CreateOptions{Key: Key{ID: "every", Scopes: AllScopes}, Secret: "every-secret"})
	a := NewAuthenticator(Options{Keys: NewKeyCache(s, time.Minute, 100)})

	for _, tc := range []struct {
		name, id, secret string
		want             []string
	}{
		{"Some", "some", "some-secret", some},
		{"Every", "every", "every-secret", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := s.ByHash(ctx, HashSecret(tc.secret))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, k.Layers); diff != "" || (tc.want == nil) != (k.Layers == nil) {
				t.Errorf("ByHash(%s).Layers = %q, want %q", tc.id, k.Layers, tc.want)
			}
			var isNull bool
			if err := db.QueryRow(ctx, `SELECT layers IS NULL FROM api_keys WHERE id = $1`, tc.id).Scan(&isNull); err != nil || isNull != (tc.want == nil) {
				t.Errorf("layers IS NULL for %s = %v (%v), want %v", tc.id, isNull, err, tc.want == nil)
			}
			req, _ := http.NewRequest("GET", "/within", nil)
			req.Header.Set("x-api-key", tc.secret)
			id, err := a.Authenticate(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, id.Layers); diff != "" || (tc.want == nil) != (id.Layers == nil) {
				t.Errorf("Authenticate(%s).Layers = %q, want %q", tc.id, id.Layers, tc.want)
			}
			if got, want := id.MayRead("transit__stops"), true; got != want {
				t.Errorf("Authenticate(%s).MayRead(transit__stops) = %v, want %v", tc.id, got, want)
			}
			if got, want := id.MayRead("roads"), tc.want == nil; got != want {
				t.Errorf("Authenticate(%s).MayRead(roads) = %v, want %v", tc.id, got, want)
			}
		})
	}
	t.Run("List", func(t *testing.T) {
		keys, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, k := range keys {
			got[k.ID] = k.Layers
		}
		if diff := cmp.Diff(map[string][]string{"every": nil, "some": some}, got); diff != "" {
			t.Errorf("List() layers (-want +got):\n%s", diff)
		}
	})
	t.Run("Replace", func(t *testing.T) {
		for _, layers := range [][]string{{"roads"}, nil} {
			mustCreate(t, s, CreateOptions{Key: Key{ID: "some", Scopes: AllScopes, Layers: layers}, Secret: "some-secret", Replace: true})
			k, err := s.ByHash(ctx, HashSecret("some-secret"))
			if err != nil || !cmp.Equal(layers, k.Layers) || (layers == nil) != (k.Layers == nil) {
				t.Errorf("after replacing with layers %q: %q, %v", layers, k.Layers, err)
			}
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, layers := range [][]string{{}, {"a b"}, {"roads", "roads"}, {""}} {
			_, err := s.Create(ctx, CreateOptions{Key: Key{ID: "bad", Scopes: AllScopes, Layers: layers}})
			if apperr.KindOf(err) != apperr.Invalid || !strings.Contains(apperr.MessageOf(err), "layers are not valid") {
				t.Errorf("Create(layers %q) = %v, want Invalid naming the layers", layers, err)
			}
		}
		if _, err := s.ByHash(ctx, HashSecret("bad")); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("a refused key was stored: %v", err)
		}
	})
	t.Run("BadRowRefused", func(t *testing.T) {
		// A row written with plain SQL, around Create's checks.
		if _, err := db.Exec(ctx, `INSERT INTO api_keys (id, secret_hash, layers) VALUES ('sql', sha256('sql-secret'), '{"a b"}')`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ByHash(ctx, HashSecret("sql-secret")); err == nil || apperr.KindOf(err) != apperr.Internal {
			t.Errorf("ByHash(key with a malformed layer) = %v, want an internal error", err)
		}
	})
}

// TestKeyLayersChangeWithinTTL: layers changed in the store (the secret
// kept) reach requests once the cached answer is a TTL old, as every other
// attribute of a key does.
func TestKeyLayersChangeWithinTTL(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Minute
	s := NewStore(testenv.DB(t))
	mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes, Layers: []string{"roads"}}, Secret: "k-secret"})
	cache := NewKeyCache(s, ttl, 100)
	var offset time.Duration
	cache.now = func() time.Time { return time.Now().Add(offset) }
	for _, step := range []struct {
		name   string
		layers []string // replaced with before the step; nil keeps the key
		after  time.Duration
		want   []string
	}{
		{"First", nil, 0, []string{"roads"}},
		{"ChangedWithinTTL", []string{"places"}, ttl / 2, []string{"roads"}},
		{"ChangedAfterTTL", nil, ttl, []string{"places"}},
	} {
		if step.layers != nil {
			mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes, Layers: step.layers}, Secret: "k-secret", Replace: true})
		}
		offset += step.after
		k, err := cache.Verify(ctx, "k-secret")
		if err != nil || !cmp.Equal(k.Layers, step.want) {
			t.Errorf("%s: Verify(k).Layers = %q, %v; want %q", step.name, k.Layers, err, step.want)
		}
	}
}

// TestStoreGetUpdate: Get finds a key by id, Update changes what it may
// change and nothing else, overrides round-trip, and unknown or malformed
// ids are ErrKeyNotFound.
func TestStoreGetUpdate(t *testing.T) {
	ctx := context.Background()
	s := NewStore(testenv.DB(t))
	mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: []string{ScopeTilesRead}, Notes: "first"}, Secret: "k-secret"})
	before, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if before.ID != "k" || before.Notes != "first" || before.Overrides != nil || before.PreviousSecretUntil != nil {
		t.Errorf("Get(k) = %+v, want the key as created, without overrides or a previous secret", before)
	}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	box, _ := spatial.NewBBox(13, 52, 14, 53)
	changed := before
	changed.Notes, changed.Scopes, changed.Tier, changed.Spatial = "second", []string{ScopeAdmin, ScopeTilesRead}, "gold", box
	changed.ExpiresAt, changed.Layers, changed.Overrides = &exp, []string{"roads"}, map[string]string{"geofence": "10/1s"}
	if err := s.Update(ctx, changed); err != nil {
		t.Fatalf("Update() = %v", err)
	}
	after, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(changed, after, cmp.AllowUnexported(Key{}), cmp.Comparer(func(a, b *spatial.Scope) bool { return a.String() == b.String() })); diff != "" {
		t.Errorf("Get after Update (-want +got):\n%s", diff)
	}
	if k, err := s.ByHash(ctx, HashSecret("k-secret")); err != nil || k.Notes != "second" {
		t.Errorf("ByHash(k) after Update = %+v, %v; want the changed key under the same secret", k, err)
	}
	for _, id := range []string{"missing", "a b", ""} {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("Get(%q) = %v, want ErrKeyNotFound", id, err)
		}
	}
	if err := s.Update(ctx, Key{ID: "missing"}); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("Update(missing) = %v, want ErrKeyNotFound", err)
	}
	if err := s.Update(ctx, Key{ID: "k", Layers: []string{}}); apperr.KindOf(err) != apperr.Invalid {
		t.Errorf("Update(empty layers) = %v, want Invalid", err)
	}
}

// TestStoreRotate: after a rotation the new secret works and the old one
// works until the grace period ends, cached or not; a second rotation
// ends the first old secret at once; replacing the key ends it too; a
// revoked or unknown key cannot be rotated.
func TestStoreRotate(t *testing.T) {
	ctx := context.Background()
	s := NewStore(testenv.DB(t))
	mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret"})
	cache := NewKeyCache(s, time.Hour, 100)
	var offset time.Duration
	cache.now = func() time.Time { return time.Now().Add(offset) }
	if _, err := cache.Verify(ctx, "k-secret"); err != nil {
		t.Fatal(err)
	}
	const grace = time.Hour
	second, err := s.Rotate(ctx, "k", grace)
	if err != nil {
		t.Fatalf("Rotate() = %v", err)
	}
	if !strings.HasPrefix(second, "gg_k_") {
		t.Errorf("Rotate() = %q, want a gg_k_ secret", second)
	}
	k, err := s.Get(ctx, "k")
	if err != nil || k.PreviousSecretUntil == nil || time.Until(*k.PreviousSecretUntil) < grace-time.Minute {
		t.Fatalf("Get after Rotate = %+v, %v; want the previous secret good for about %v", k, err, grace)
	}
	// The cache still holds the old secret's answer, from before the
	// rotation: a fresh cache reads both from the store.
	fresh := NewKeyCache(s, time.Hour, 100)
	fresh.now = cache.now
	for _, c := range []*KeyCache{cache, fresh} {
		c.Forget("k")
		for _, secret := range []string{"k-secret", second} {
			if got, err := c.Verify(ctx, secret); err != nil || got.ID != "k" {
				t.Errorf("Verify(%.8s...) within the grace period = %v, want key k", secret, err)
			}
		}
	}
	offset = grace + time.Minute
	if _, err := cache.Verify(ctx, "k-secret"); !errors.Is(err, errRotatedKey) {
		t.Errorf("Verify(old secret) after the grace period = %v, want errRotatedKey", err)
	}
	if _, err := cache.Verify(ctx, second); err != nil {
		t.Errorf("Verify(new secret) after the grace period = %v, want nil", err)
	}
	offset = 0

	third, err := s.Rotate(ctx, "k", grace)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		secret string
		works  bool
	}{{"k-secret", false}, {second, true}, {third, true}} {
		k, err := s.ByHash(ctx, HashSecret(tc.secret))
		if err == nil {
			err = k.Usable(time.Now())
		}
		if (err == nil) != tc.works {
			t.Errorf("after a second rotation, secret %.8s...: %v, want working %v", tc.secret, err, tc.works)
		}
	}
	if _, err := s.Rotate(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if k, err := s.ByHash(ctx, HashSecret(third)); err != nil || k.Usable(time.Now()) == nil {
		t.Errorf("secret rotated away without grace: %+v, %v; want found but unusable", k, err)
	}

	mustCreate(t, s, CreateOptions{Key: Key{ID: "k", Scopes: AllScopes}, Secret: "k-secret", Replace: true})
	if k, err := s.Get(ctx, "k"); err != nil || k.PreviousSecretUntil != nil {
		t.Errorf("after replace: %+v, %v; want no previous secret", k, err)
	}
	if err := s.Revoke(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rotate(ctx, "k", grace); !errors.Is(err, ErrKeyRevoked) {
		t.Errorf("Rotate(revoked) = %v, want ErrKeyRevoked", err)
	}
	if k, err := s.ByHash(ctx, HashSecret("k-secret")); err != nil || k.PreviousSecretUntil != nil {
		t.Errorf("a refused rotation changed the key: %+v, %v", k, err)
	}
	if _, err := s.Rotate(ctx, "missing", grace); !errors.Is(err, ErrKeyNotFound) {
		t.Errorf("Rotate(missing) = %v, want ErrKeyNotFound", err)
	}
}

// TestKeyAccount: a key's account is stored, reaches the identity of its
// requests, and can be cleared.
func TestKeyAccount(t *testing.T) {
	ctx := context.Background()
	s := NewStore(testenv.DB(t))
	secret := mustCreate(t, s, CreateOptions{Key: Key{ID: "acme-1", Scopes: AllScopes, Account: "acme"}})
	a := NewAuthenticator(Options{Keys: NewKeyCache(s, time.Second, 10)})
	req, _ := http.NewRequest("GET", "/within", nil)
	req.Header.Set("x-api-key", secret)
	id, err := a.Authenticate(ctx, req)
	if err != nil || id.Account != "acme" {
		t.Fatalf("Authenticate(acme-1) = %+v, %v; want the account acme", id, err)
	}
	k, _ := s.Get(ctx, "acme-1")
	k.Account = ""
	if err := s.Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	if k, err := s.Get(ctx, "acme-1"); err != nil || k.Account != "" {
		t.Errorf("after clearing it, Get(acme-1) = account %q, %v; want none", k.Account, err)
	}
}
