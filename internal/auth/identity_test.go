package auth

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

func TestIPKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.9":          "203.0.113.9",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"::ffff:198.51.100.4":  "198.51.100.4",
		"::1":                  "::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
	} {
		if got := IPKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("IPKey(%s) = %s, want %s", in, got, want)
		}
	}
	if got := IPKey(netip.Addr{}); got != "unknown" {
		t.Errorf("IPKey(invalid) = %s, want unknown", got)
	}
}

// TestAnonymousIdentity drives the middleware: anonymous callers are
// known by their address, which spoofed headers do not change unless a
// trusted proxy sent them; IPv6 callers share their /64.
func TestAnonymousIdentity(t *testing.T) {
	trusted, _ := httpx.ParseTrustedProxies([]string{"10.0.0.0/8"})
	h := testRouterBehind(NewAuthenticator(Options{AnonymousScopes: ReadScopes}), trusted)
	for _, tc := range []struct {
		name, remote, xff, want string
	}{
		{"Direct", "203.0.113.9:1", "", "ip:203.0.113.9"},
		{"SpoofedXFFUntrusted", "203.0.113.9:1", "1.2.3.4", "ip:203.0.113.9"},
		{"XFFFromTrustedProxy", "10.0.0.1:1", "198.51.100.4", "ip:198.51.100.4"},
		{"IPv6GroupedBy64", "[2001:db8:1:2:aaaa::1]:1", "", "ip:2001:db8:1:2::/64"},
		{"IPv6SameNetworkOtherHost", "[2001:db8:1:2:bbbb::9]:1", "", "ip:2001:db8:1:2::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.xff != "" {
				hdr["X-Forwarded-For"] = tc.xff
			}
			res := do(t, h, "GET", "/within", hdr, tc.remote)
			if res.status != http.StatusOK || !strings.Contains(res.body, `"limit_key":"`+tc.want+`"`) {
				t.Errorf("GET /within from %s (XFF %q) = %d %s, want limit_key %s", tc.remote, tc.xff, res.status, res.body, tc.want)
			}
		})
	}
	t.Run("AnonymousRefusedWhereNotAllowed", func(t *testing.T) {
		res := do(t, h, "POST", "/geofences", nil, "203.0.113.9:1")
		checkRejection(t, res, http.StatusUnauthorized, "Authentication required")
		if got := res.header.Get("WWW-Authenticate"); got != Challenge {
			t.Errorf("WWW-Authenticate = %q, want %q", got, Challenge)
		}
	})
	t.Run("NoAnonymousScopes", func(t *testing.T) {
		closed := testRouter(NewAuthenticator(Options{}))
		checkRejection(t, do(t, closed, "GET", "/within", nil, "203.0.113.9:1"), http.StatusUnauthorized, "Authentication required")
	})
}

func TestLimitKey(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Kind: KindKey, ID: "demo"}, "key:demo"},
		{Identity{Kind: KindSub, ID: "auth0|12345"}, "sub:auth0|12345"},
		{Identity{Kind: KindIP, ID: "2001:db8:1:2::/64"}, "ip:2001:db8:1:2::/64"},
		{Identity{Kind: KindSub, ID: "{tag}"}, "sub:h:"},
		{Identity{Kind: KindSub, ID: strings.Repeat("x", 300)}, "sub:h:"},
		{Identity{}, "ip:unknown"},
	} {
		if got := tc.id.LimitKey(); !strings.HasPrefix(got, tc.want) || strings.ContainsAny(got, "{} ") {
			t.Errorf("%+v.LimitKey() = %q, want %q…", tc.id, got, tc.want)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Bearer a.b.c", "a.b.c", true},
		{"bearer  a.b.c", "a.b.c", true},
		{"BEARER a.b.c ", "a.b.c", true},
		{"Bearer", "", false},
		{"Bearer a.b", "", false},
		{"Bearer a.b.c.d", "", false},
		{"Basic a.b.c", "", false},
		{"Bearer a.b.c\x00", "", false},
		{"Bearer " + strings.Repeat("a", MaxTokenLength) + ".b.c", "", false},
	} {
		got, err := BearerToken(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("BearerToken(%.40q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestOutcomeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAuthenticator(Options{AnonymousScopes: ReadScopes, Registerer: reg})
	h := testRouter(a)
	do(t, h, "GET", "/within", nil, "203.0.113.9:1")
	do(t, h, "GET", "/within", map[string]string{"x-api-key": "nope"}, "")
	do(t, h, "GET", "/within", map[string]string{"x-api-key": "nope"}, "")
	do(t, h, "GET", "/within", map[string]string{"x-api-key": "k", "Authorization": "Bearer a.b.c"}, "")
	for _, tc := range []struct {
		method, result string
		want           float64
	}{
		{"anonymous", "ok", 1},
		{"key", "rejected", 2},
		{"both", "rejected", 1},
		{"bearer", "ok", 0},
	} {
		if got := counterValue(t, reg, tc.method, tc.result); got != tc.want {
			t.Errorf("geogate_auth_requests_total{%s,%s} = %v, want %v", tc.method, tc.result, got, tc.want)
		}
	}
}

// counterValue reads geogate_auth_requests_total{method, result} from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, method, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "geogate_auth_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestAccessLogCarriesIdentity(t *testing.T) {
	var buf bytes.Buffer
	r := httpx.NewRouter(slog.New(slog.NewJSONHandler(&buf, nil)), nil, httpx.TrustedProxies{})
	r.Use(NewAuthenticator(Options{AnonymousScopes: ReadScopes}).middleware())
	r.GET("/within", require(ScopeProximityRead), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	do(t, r, "GET", "/within", nil, "[2001:db8:1:2::7]:1")
	if !strings.Contains(buf.String(), `"identity":"ip:2001:db8:1:2::/64"`) {
		t.Errorf("access log = %s, want the identity", buf.String())
	}
}

// TestAnonymousScopesNeverAdmin: New refuses to grant the admin scope to
// callers without credentials, whatever the configuration says, and the
// default anonymous scopes lack it.
func TestAnonymousScopesNeverAdmin(t *testing.T) {
	if slices.Contains(ReadScopes, ScopeAdmin) {
		t.Errorf("ReadScopes = %v, want them without %s", ReadScopes, ScopeAdmin)
	}
	if !slices.Contains(AllScopes, ScopeAdmin) {
		t.Errorf("AllScopes = %v, want %s among them", AllScopes, ScopeAdmin)
	}
	for _, tc := range []struct {
		name    string
		scopes  []string
		wantErr bool
	}{
		{"ReadScopes", ReadScopes, false},
		{"None", nil, false},
		{"Admin", []string{ScopeAdmin}, true},
		{"AdminAmongOthers", []string{ScopeTilesRead, ScopeAdmin}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), Settings{AnonymousScopes: tc.scopes}, Deps{})
			if got := err != nil; got != tc.wantErr {
				t.Errorf("New(AnonymousScopes %v) = %v, want an error: %v", tc.scopes, err, tc.wantErr)
			}
		})
	}
}
