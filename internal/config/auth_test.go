package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadAuth(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	t.Run("Defaults", func(t *testing.T) {
		c, err := Load(env(base))
		if err != nil {
			t.Fatal(err)
		}
		a := c.Auth
		if !slices.Equal(a.AnonymousScopes, []string{"proximity:read", "geofences:read", "tiles:read", "features:read"}) || a.KeyCacheTTL != 5*time.Second || a.Leeway != 30*time.Second || a.JWTSecret != "" {
			t.Errorf("Auth defaults = %+v", a)
		}
	})
	t.Run("NoAnonymousScopes", func(t *testing.T) {
		c, err := Load(env(with(map[string]string{"AUTH_ANONYMOUS_SCOPES": "none", "TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"})))
		if err != nil {
			t.Fatal(err)
		}
		if c.Auth.AnonymousScopes != nil {
			t.Errorf("Auth = %+v, want no anonymous scopes", c.Auth)
		}
		for addr, want := range map[string]bool{"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false} {
			if got := c.Server.TrustedProxies.Trusts(netip.MustParseAddr(addr)); got != want {
				t.Errorf("TrustedProxies.Trusts(%s) = %v, want %v", addr, got, want)
			}
		}
	})
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"BadProxy", map[string]string{"TRUSTED_PROXIES": "10.0.0.0/33"}, "TRUSTED_PROXIES"},
		{"ShortSecret", map[string]string{"JWT_HS256_SECRET": "short"}, "JWT_HS256_SECRET"},
		{"BothJWKS", map[string]string{"JWT_JWKS_URL": "https://x/jwks", "JWT_JWKS_FILE": "/x"}, "JWT_JWKS_FILE"},
		{"BadJWKSScheme", map[string]string{"JWT_JWKS_URL": "ftp://x/jwks"}, "JWT_JWKS_URL"},
		{"BadAlgorithm", map[string]string{"JWT_ALGORITHMS": "HS256,none"}, "JWT_ALGORITHMS"},
		{"PipeInIssuer", map[string]string{"JWT_ISSUER": "https://a,b|c"}, "JWT_ISSUER"},
		{"HugeLeeway", map[string]string{"JWT_LEEWAY": "1h"}, "JWT_LEEWAY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(env(with(tc.env)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() = %v, want an error naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "short\"") {
				t.Errorf("error %q quotes the secret", err)
			}
		})
	}
}
