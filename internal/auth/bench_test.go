package auth

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/geogate/geogate/internal/testenv"
)

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifications/s")
}

func benchStore(b *testing.B) *Store {
	s := NewStore(testenv.DB(b))
	if _, err := s.Create(context.Background(), CreateOptions{Key: Key{ID: "demo", Scopes: AllScopes}, Secret: "demo"}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAPIKey measures verifying an API key: the cache-hit path (one
// SHA-256 and a map read) and the database path (a cache miss: an indexed
// lookup by hash in PostGIS).
func BenchmarkAPIKey(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	b.Run("CacheHit", func(b *testing.B) {
		c := NewKeyCache(s, time.Minute, 1000)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Verify(ctx, "demo"); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
	b.Run("Database", func(b *testing.B) {
		c := NewKeyCache(s, time.Nanosecond, 1000)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Verify(ctx, "demo"); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
	b.Run("Middleware", func(b *testing.B) {
		h := testRouter(NewAuthenticator(Options{Keys: NewKeyCache(s, time.Minute, 1000)}))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req := httptest.NewRequest("GET", "/within", nil)
				req.Header.Set("x-api-key", "demo")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Errorf("status %d", w.Code)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	})
}

// BenchmarkToken measures verifying a bearer token per algorithm.
func BenchmarkToken(b *testing.B) {
	k := signingKeys(b)
	jwks := NewJWKSFile("", 0, nil)
	keys, err := parseJWKS(k.jwksDoc)
	if err != nil {
		b.Fatal(err)
	}
	jwks.keys = keys
	tv, err := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret), JWKS: jwks, Leeway: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	geo := map[string]any{"geo_scope": []float64{13, 52, 14, 53}}
	for _, tc := range []struct {
		name string
		tok  string
	}{
		{"HS256", sign(b, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, nil))},
		{"HS256WithGeoScope", sign(b, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, geo))},
		{"HS256WithPolygonScope", sign(b, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, map[string]any{"geo_scope": json.RawMessage(`{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,2],[2,2],[2,10],[0,10],[0,0]]]}`)}))},
		{"RS256", sign(b, jwt.SigningMethodRS256, k.rsa, "rsa1", claimsAt(now, nil))},
		{"ES256", sign(b, jwt.SigningMethodES256, k.ec, "ec1", claimsAt(now, nil))},
		{"EdDSA", sign(b, jwt.SigningMethodEdDSA, k.ed, "ed1", claimsAt(now, nil))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tv.Verify(tc.tok); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRate(b)
		})
	}
}
