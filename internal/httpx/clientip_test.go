package httpx

import (
	"net/http/httptest"
	"strings"
	"testing"
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
