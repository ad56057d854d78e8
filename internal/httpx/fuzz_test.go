package httpx

import (
	"net/http/httptest"
	"testing"
)

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:5000", "198.51.100.4, 10.2.2.2", "")
	f.Add("203.0.113.9:1", "1.2.3.4", "5.6.7.8")
	f.Add("[fd00::1]:1", "[2001:db8::1]:443, unknown", "")
	f.Add("10.0.0.1:5000", "", "2001:db8::1")
	f.Add("garbage", ",,,", "[")
	trusted, _ := ParseTrustedProxies([]string{"10.0.0.0/8", "fd00::/8"})
	f.Fuzz(func(t *testing.T, remote, xff, realIP string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["X-Real-Ip"] = []string{realIP}
		got := ClientIP(r, trusted)
		peer := parseHostPort(remote)
		if !trusted.Trusts(peer) && got != peer {
			t.Fatalf("ClientIP from untrusted peer %q = %v, want the peer %v", remote, got, peer)
		}
		if peer.IsValid() && !got.IsValid() {
			t.Fatalf("ClientIP(%q, %q, %q) is invalid", remote, xff, realIP)
		}
	})
}
