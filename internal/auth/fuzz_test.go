package auth

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"

	"github.com/geogate/geogate/internal/apperr"
)

// fuzzNow is the clock of the token fuzz target, so that the committed
// seed tokens (iat 2026-01-01, valid for ten years) stay valid.
var fuzzNow = time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer a.b.c", "bearer x", "Basic dXNlcjpwdw==", "Bearer ..", "Bearer  a.b.c.d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := BearerToken(h)
		if err != nil {
			if apperr.KindOf(err) != apperr.Unauthenticated {
				t.Fatalf("BearerToken(%q) error kind %v, want Unauthenticated", h, apperr.KindOf(err))
			}
			return
		}
		if strings.Count(tok, ".") != 2 || len(tok) > MaxTokenLength || !strings.Contains(h, tok) {
			t.Fatalf("BearerToken(%q) = %q: not a bounded three-part token from the header", h, tok)
		}
	})
}

// fuzzVerifier verifies HS256 with testSecret and the test key set, on
// the fuzz clock.
func fuzzVerifier(tb testing.TB) *TokenVerifier {
	tb.Helper()
	k := signingKeys(tb)
	jwks := NewJWKSFile("", 0, nil)
	keys, err := parseJWKS(k.jwksDoc)
	if err != nil {
		tb.Fatal(err)
	}
	jwks.keys = keys
	jwks.lastAttempt = time.Now().Add(time.Hour) // never reload from the (empty) path
	tv, err := NewTokenVerifier(TokenOptions{
		HS256Secret: []byte(testSecret),
		JWKS:        jwks,
		Leeway:      30 * time.Second,
		Now:         func() time.Time { return fuzzNow },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return tv
}

// TestFuzzSeedsStayMeaningful: the committed seed tokens still exercise
// the accepting path and each rejection they were made for.
func TestFuzzSeedsStayMeaningful(t *testing.T) {
	tv := fuzzVerifier(t)
	for name, wantErr := range map[string]error{
		"valid": nil, "valid_geoscope": nil, "expired": errExpiredToken, "not_yet": errEarlyToken,
		"bad_signature": errInvalidToken, "alg_none": errInvalidToken, "alg_rs256_kid": errInvalidToken,
		"scope_number": errTokenClaims, "no_sub": errTokenClaims, "geo_polygon": nil,
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzVerifyToken", name))
		if err != nil {
			t.Fatal(err)
		}
		lit := strings.TrimSuffix(strings.TrimPrefix(strings.Split(string(data), "\n")[1], "string("), ")")
		tok, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		if _, err := tv.Verify(tok); err != wantErr {
			t.Errorf("Verify(seed %s) = %v, want %v", name, err, wantErr)
		}
	}
}

func FuzzVerifyToken(f *testing.F) {
	tv := fuzzVerifier(f)
	f.Add(mintForFuzz(f, fuzzNow))
	f.Fuzz(func(t *testing.T, tok string) {
		if len(tok) > MaxTokenLength {
			return
		}
		id, err := tv.Verify(tok)
		if err != nil {
			if apperr.KindOf(err) != apperr.Unauthenticated {
				t.Fatalf("Verify(%q) error kind %v, want Unauthenticated", tok, apperr.KindOf(err))
			}
			if m := apperr.MessageOf(err); len(tok) >= 8 && strings.Contains(m, tok) {
				t.Fatalf("Verify error message %q quotes the token", m)
			}
			return
		}
		if id.Kind != KindSub || id.ID == "" {
			t.Fatalf("Verify(%q) accepted with identity %+v", tok, id)
		}
	})
}

// mintForFuzz returns a valid HS256 token at now, for the fuzz seeds.
func mintForFuzz(tb testing.TB, now time.Time) string {
	tb.Helper()
	s, _ := NewBBoxScope(13, 52, 14, 53)
	tok, err := MintHS256([]byte(testSecret), MintOptions{Subject: "seed", Scopes: AllScopes, Spatial: s, TTL: time.Hour, Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func FuzzAPIKeyHeader(f *testing.F) {
	for _, s := range []string{"demo", "gg_demo_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "a b", "", "\x00", strings.Repeat("k", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := checkKeyHeader(s); err == nil {
			if len(s) == 0 || len(s) > MaxKeyLength || strings.ContainsAny(s, " \t\r\n\x00\x7f") {
				t.Fatalf("checkKeyHeader(%q) accepted", s)
			}
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["X-Api-Key"] = []string{s}
		// With no key store every key is refused, with a 401.
		if _, err := NewAuthenticator(Options{}).Authenticate(context.Background(), r); apperr.KindOf(err) != apperr.Unauthenticated {
			t.Fatalf("Authenticate(x-api-key %q) = %v, want Unauthenticated", s, err)
		}
	})
}

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
		if key := IPKey(got); strings.ContainsAny(key, " {},") {
			t.Fatalf("IPKey(%v) = %q", got, key)
		}
	})
}

func FuzzParseSpatialScope(f *testing.F) {
	for _, s := range []string{berlinBox, lShape, holed, splitAtDateLine, `[170,-60,-170,-30]`, `null`, `{"type":"Point","coordinates":[1,2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		s, err := ParseSpatialScope(data)
		if err != nil || s == nil {
			return
		}
		_ = s.ContainsCircle(13.4, 52.5, 1000)
		_ = s.ContainsBBox(-1, -1, 1, 1)
		_ = s.IntersectsBBox(170, -10, -170, 10)
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := ParseSpatialScope(out)
		if err != nil || back.Hash() != s.Hash() {
			t.Fatalf("round trip of %s via %s: %v", data, out, err)
		}
	})
}

func FuzzContainsGeometry(f *testing.F) {
	for _, g := range []string{
		`{"type":"Polygon","coordinates":[[[1,1],[9,1],[1,9],[1,1]]]}`,
		`{"type":"LineString","coordinates":[[1,9],[9,1]]}`,
		`{"type":"Point","coordinates":[5,5]}`,
		`{"type":"MultiPolygon","coordinates":[[[[3,3],[7,3],[7,7],[3,7],[3,3]],[[4,4],[6,4],[6,6],[4,6],[4,4]]]]}`,
		`{"type":"GeometryCollection","geometries":[{"type":"Point","coordinates":[1,1]}]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[0,0],[0,0],[0,0]]]}`,
	} {
		f.Add(uint8(0), []byte(g))
		f.Add(uint8(1), []byte(g))
	}
	scopes := []*SpatialScope{mustScope(f, lShape), mustScope(f, holed), mustScope(f, berlinBox), mustScope(f, splitAtDateLine)}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		if len(data) > 16<<10 {
			return
		}
		var g geom.T
		if err := geojson.Unmarshal(data, &g); err != nil || g == nil {
			return
		}
		s := scopes[int(which)%len(scopes)]
		if !s.ContainsGeometry(g) {
			return
		}
		// Contained: every vertex is in the scope.
		lines, _, _ := flatten(g)
		for _, l := range lines {
			for _, p := range l {
				if !s.ContainsBBox(p.x, p.y, p.x, p.y) && (s.polys == nil || !s.pointIn(p)) {
					t.Fatalf("ContainsGeometry(%s) = true, but vertex %v is outside", data, p)
				}
			}
		}
	})
}
