package auth

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/httpx"
)

func TestClientIP(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		remote  string
		xff     []string
		realIP  string
		trusted TrustedProxies
		want    string
	}{
		{"NoHeaders", "203.0.113.9:5000", nil, "", trusted, "203.0.113.9"},
		{"SpoofFromUntrustedPeer", "203.0.113.9:5000", []string{"1.2.3.4"}, "", trusted, "203.0.113.9"},
		{"RealIPFromUntrustedPeer", "203.0.113.9:5000", nil, "1.2.3.4", trusted, "203.0.113.9"},
		{"NothingTrustedByDefault", "10.0.0.1:5000", []string{"1.2.3.4"}, "", TrustedProxies{}, "10.0.0.1"},
		{"TrustedProxy", "10.0.0.1:5000", []string{"198.51.100.4"}, "", trusted, "198.51.100.4"},
		{"TrustedProxyBareAddress", "192.0.2.7:5000", []string{"198.51.100.4"}, "", trusted, "198.51.100.4"},
		{"RightmostUntrustedWins", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.4, 10.1.1.1"}, "", trusted, "198.51.100.4"},
		{"SpoofedLeftPartIgnored", "10.0.0.1:5000", []string{"1.1.1.1", "198.51.100.4"}, "", trusted, "198.51.100.4"},
		{"SeveralLinesInOrder", "10.0.0.1:5000", []string{"198.51.100.4", "10.2.2.2"}, "", trusted, "198.51.100.4"},
		{"AllTrustedTakesLeftmost", "10.0.0.1:5000", []string{"10.3.3.3, 10.2.2.2"}, "", trusted, "10.3.3.3"},
		{"GarbageStopsAtLastGood", "10.0.0.1:5000", []string{"198.51.100.4, garbage, 10.2.2.2"}, "", trusted, "10.2.2.2"},
		{"GarbageOnly", "10.0.0.1:5000", []string{"unknown"}, "", trusted, "10.0.0.1"},
		{"WithPort", "10.0.0.1:5000", []string{"198.51.100.4:1234"}, "", trusted, "198.51.100.4"},
		{"BracketedIPv6", "10.0.0.1:5000", []string{"[2001:db8::1]:443"}, "", trusted, "2001:db8::1"},
		{"RealIPFromTrusted", "10.0.0.1:5000", nil, "198.51.100.4", trusted, "198.51.100.4"},
		{"BadRealIP", "10.0.0.1:5000", nil, "nope", trusted, "10.0.0.1"},
		{"MappedPeer", "[::ffff:203.0.113.9]:5000", nil, "", trusted, "203.0.113.9"},
		{"MappedTrustedPeer", "[::ffff:10.0.0.1]:5000", []string{"198.51.100.4"}, "", trusted, "198.51.100.4"},
		{"IPv6TrustedPeer", "[fd00::1]:5000", []string{"2001:db8::5"}, "", trusted, "2001:db8::5"},
		{"ZoneDropped", "[fe80::1%eth0]:5000", nil, "", trusted, "fe80::1"},
		{"LongChainBounded", "10.0.0.1:5000", []string{strings.Repeat("10.0.0.2, ", 100) + "10.0.0.3"}, "", trusted, "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if tc.realIP != "" {
				r.Header.Set("X-Real-IP", tc.realIP)
			}
			if got := ClientIP(r, tc.trusted); got.String() != tc.want {
				t.Errorf("ClientIP(remote %s, xff %q) = %s, want %s", tc.remote, tc.xff, got, tc.want)
			}
		})
	}
}

func TestParseTrustedProxiesRejects(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "nope", "1.2.3"} {
		if _, err := ParseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("ParseTrustedProxies(%q) = nil error, want one", bad)
		}
	}
}

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
	trusted, _ := ParseTrustedProxies([]string{"10.0.0.0/8"})
	h := testRouter(NewAuthenticator(Options{AnonymousScopes: ReadScopes, Trusted: trusted}))
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
	r := httpx.NewRouter(slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	r.Use(NewAuthenticator(Options{AnonymousScopes: ReadScopes}).Middleware())
	r.GET("/within", Require(ScopeProximityRead), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	do(t, r, "GET", "/within", nil, "[2001:db8:1:2::7]:1")
	if !strings.Contains(buf.String(), `"identity":"ip:2001:db8:1:2::/64"`) {
		t.Errorf("access log = %s, want the identity", buf.String())
	}
}
