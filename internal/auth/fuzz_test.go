package auth

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
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
	s, _ := spatial.NewBBox(13, 52, 14, 53)
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
