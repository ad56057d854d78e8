package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
)

const (
	testIssuer   = "https://issuer.example/"
	testAudience = "geogate"
)

func newTokenAuthenticator(t *testing.T) *Authenticator {
	t.Helper()
	k := signingKeys(t)
	jwks := NewJWKSFile(writeFile(t, "jwks.json", k.jwksDoc), 0, nil)
	if err := jwks.Start(context.Background()); err != nil {
		t.Fatalf("JWKS Start: %v", err)
	}
	tv, err := NewTokenVerifier(TokenOptions{
		HS256Secret: []byte(testSecret),
		JWKS:        jwks,
		Issuers:     []string{testIssuer},
		Audiences:   []string{testAudience},
		Leeway:      30 * time.Second,
	})
	if err != nil {
		t.Fatalf("NewTokenVerifier: %v", err)
	}
	return NewAuthenticator(Options{AnonymousScopes: ReadScopes, Tokens: tv})
}

// claimsAt returns valid claims for alice, changed by edits.
func claimsAt(now time.Time, edits map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub":   "alice",
		"iss":   testIssuer,
		"aud":   testAudience,
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(time.Hour).Unix(),
		"scope": "proximity:read tiles:read",
	}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestBearerTokens(t *testing.T) {
	k := signingKeys(t)
	h := testRouter(newTokenAuthenticator(t))
	now := time.Now()
	hs := func(edits map[string]any) string {
		return sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, edits))
	}
	rs := sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", claimsAt(now, nil))
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", claimsAt(now, nil))
	parts := strings.Split(rs, ".")
	tampered := parts[0] + "." + strings.Split(hs(map[string]any{"sub": "mallory"}), ".")[1] + "." + parts[2]

	ok := []struct {
		name, token, wantKey string
	}{
		{"HS256", hs(nil), "sub:alice"},
		{"RS256", rs, "sub:alice"},
		{"ES256", sign(t, jwt.SigningMethodES256, k.ec, "ec1", claimsAt(now, nil)), "sub:alice"},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, k.ed, "ed1", claimsAt(now, nil)), "sub:alice"},
		{"ExpiredWithinLeeway", hs(map[string]any{"exp": now.Add(-10 * time.Second).Unix()}), "sub:alice"},
		{"ScopesArray", hs(map[string]any{"scope": nil, "scopes": []string{"proximity:read"}}), "sub:alice"},
		{"AudienceList", hs(map[string]any{"aud": []string{"other", testAudience}}), "sub:alice"},
		{"InsideSpatialScope", hs(map[string]any{"geo_scope": []float64{13, 52, 14, 53}}), "sub:alice"},
		{"OddSubjectHashed", hs(map[string]any{"sub": "a b{c}"}), "sub:h:"},
	}
	for _, tc := range ok {
		t.Run("OK/"+tc.name, func(t *testing.T) {
			res := do(t, h, "GET", "/within", map[string]string{"Authorization": "Bearer " + tc.token}, "")
			if res.status != http.StatusOK || !strings.Contains(res.body, `"limit_key":"`+tc.wantKey) {
				t.Fatalf("GET /within = %d %s, want 200 with limit_key %s", res.status, res.body, tc.wantKey)
			}
			if !strings.Contains(res.body, `"ctx_kind":"sub"`) {
				t.Errorf("identity missing from context.Context: %s", res.body)
			}
		})
	}

	bad := []struct {
		name, header   string
		wantStatus     int
		wantDetail     string
		wantInvalidTok bool
	}{
		{"Basic/UnknownKey", "Basic YWxpY2U6cHc=", 401, "The API key is not valid.", false},
		{"Malformed/Scheme", "Digest YWxpY2U6cHc=", 401, "must be \"Bearer <token>\"", false},
		{"Malformed/Empty", "Bearer ", 401, "must be \"Bearer <token>\"", false},
		{"Malformed/NotJWT", "Bearer not-a-jwt", 401, "not valid", true},
		{"Malformed/Garbage", "Bearer a.b.c", 401, "not valid", true},
		{"Malformed/BadChars", "Bearer a.b.c$", 401, "not valid", true},
		{"Expired", "Bearer " + hs(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()}), 401, "has expired", true},
		{"NotYetValid", "Bearer " + hs(map[string]any{"nbf": now.Add(2 * time.Minute).Unix()}), 401, "not valid yet", true},
		{"IssuedInFuture", "Bearer " + hs(map[string]any{"iat": now.Add(2 * time.Minute).Unix()}), 401, "not valid yet", true},
		{"NoExpiry", "Bearer " + hs(map[string]any{"exp": nil}), 401, "required claim", true},
		{"BadSignature", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789abcdef012345"), "", claimsAt(now, nil)), 401, "not valid", true},
		{"TamperedPayload", "Bearer " + tampered, 401, "not valid", true},
		{"AlgNone", "Bearer " + none, 401, "not valid", true},
		{"HS256SignedWithRSAPublicKey", "Bearer " + sign(t, jwt.SigningMethodHS256, k.rsaPEM, "rsa1", claimsAt(now, nil)), 401, "not valid", true},
		{"RS256UnknownSigner", "Bearer " + sign(t, jwt.SigningMethodRS256, otherRSA, "rsa1", claimsAt(now, nil)), 401, "not valid", true},
		{"RS256UnknownKid", "Bearer " + sign(t, jwt.SigningMethodRS256, k.rsa, "nope", claimsAt(now, nil)), 401, "not valid", true},
		{"ES256WithRSAKid", "Bearer " + sign(t, jwt.SigningMethodES256, k.ec, "rsa1", claimsAt(now, nil)), 401, "not valid", true},
		{"RS512NotAllowed", "Bearer " + sign(t, jwt.SigningMethodRS512, k.rsa, "rsa1", claimsAt(now, nil)), 401, "not valid", true},
		{"CriticalHeader", "Bearer " + signWithHeader(t, "crit", []string{"exp"}, claimsAt(now, nil)), 401, "not valid", true},
		{"WrongIssuer", "Bearer " + hs(map[string]any{"iss": "https://evil.example/"}), 401, "issuer", true},
		{"NoIssuer", "Bearer " + hs(map[string]any{"iss": nil}), 401, "issuer", true},
		{"WrongAudience", "Bearer " + hs(map[string]any{"aud": "someone-else"}), 401, "audience", true},
		{"NoAudience", "Bearer " + hs(map[string]any{"aud": nil}), 401, "audience", true},
		{"NoSubject", "Bearer " + hs(map[string]any{"sub": nil}), 401, "required claim", true},
		{"ScopeNotString", "Bearer " + hs(map[string]any{"scope": 42}), 401, "required claim", true},
		{"BadGeoScope", "Bearer " + hs(map[string]any{"geo_scope": []float64{1, 2, 3}}), 401, "geo_scope", true},
		{"HoleOutsideShellGeoScope", "Bearer " + hs(map[string]any{"geo_scope": map[string]any{"type": "Polygon", "coordinates": [][][]float64{{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}}, {{5, 5}, {6, 5}, {6, 6}, {5, 6}, {5, 5}}}}}), 401, "lies outside its shell", true},
		{"NestedGeoScope", "Bearer " + hs(map[string]any{"geo_scope": map[string]any{"type": "MultiPolygon", "coordinates": [][][][]float64{{{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}}}, {{{1, 1}, {2, 1}, {2, 2}, {1, 2}, {1, 1}}}}}}), 401, "lies inside polygon 0", true},
		{"MissingScope", "Bearer " + hs(map[string]any{"scope": "tiles:read"}), 403, "proximity:read", false},
		{"OutsideSpatialScope", "Bearer " + hs(map[string]any{"geo_scope": []float64{0, 0, 1, 1}}), 403, "leaves your spatial scope", false},
	}
	for _, tc := range bad {
		t.Run("Reject/"+tc.name, func(t *testing.T) {
			res := do(t, h, "GET", "/within", map[string]string{"Authorization": tc.header}, "")
			checkRejection(t, res, tc.wantStatus, tc.wantDetail, strings.TrimPrefix(tc.header, "Bearer "))
			if got := strings.Contains(res.header.Get("WWW-Authenticate"), "invalid_token"); got != tc.wantInvalidTok {
				t.Errorf("WWW-Authenticate = %q, want invalid_token: %v", res.header.Get("WWW-Authenticate"), tc.wantInvalidTok)
			}
		})
	}
}

func TestHS256SignedWithRSAKeyRejectedWithoutHS256(t *testing.T) {
	// With only a key set, HS256 is not even on the allow-list.
	k := signingKeys(t)
	jwks := NewJWKSFile(writeFile(t, "jwks.json", k.jwksDoc), 0, nil)
	if err := jwks.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tv, err := NewTokenVerifier(TokenOptions{JWKS: jwks})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, key := range [][]byte{k.rsaPEM, k.rsa.PublicKey.N.Bytes()} {
		tok := sign(t, jwt.SigningMethodHS256, key, "rsa1", claimsAt(now, nil))
		if _, err := tv.Verify(tok); err == nil {
			t.Errorf("Verify(HS256 signed with RSA public key material) = nil error, want rejection")
		}
	}
	if _, err := tv.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", claimsAt(now, nil))); err != nil {
		t.Errorf("Verify(RS256) = %v, want nil", err)
	}
}

func TestNewTokenVerifierConfig(t *testing.T) {
	if tv, err := NewTokenVerifier(TokenOptions{}); tv != nil || err != nil {
		t.Errorf("NewTokenVerifier(nothing) = %v, %v; want nil, nil (tokens disabled)", tv, err)
	}
	if _, err := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret), Algorithms: []string{"RS256"}}); err == nil {
		t.Errorf("NewTokenVerifier(RS256 without JWKS) = nil error, want one")
	}
	a := NewAuthenticator(Options{})
	res := do(t, testRouter(a), "GET", "/within", map[string]string{"Authorization": "Bearer a.b.c"}, "")
	checkRejection(t, res, 401, "does not accept bearer tokens")
}

func TestSubjectsQualifiedBySeveralIssuers(t *testing.T) {
	tv, err := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret), Issuers: []string{"https://a.example", "https://b.example"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id, err := tv.Verify(sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, map[string]any{"iss": "https://b.example", "aud": nil})))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id.LimitKey(), "sub:https://b.example|alice"; got != want {
		t.Errorf("LimitKey() = %q, want %q", got, want)
	}
}

func TestMintHS256RoundTrip(t *testing.T) {
	scope, _ := spatial.NewBBox(13, 52, 14, 53)
	tok, err := MintHS256([]byte(testSecret), MintOptions{Subject: "dev", Scopes: []string{ScopeTilesRead}, Tier: "gold", Spatial: scope, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret)})
	id, err := tv.Verify(tok)
	if err != nil {
		t.Fatalf("Verify(minted) = %v", err)
	}
	if id.ID != "dev" || id.Tier != "gold" || !id.Has(ScopeTilesRead) || id.Spatial.Hash() != scope.Hash() {
		t.Errorf("Verify(minted) = %+v, want dev/gold/tiles:read/%s", id, scope)
	}
}

// TestJWKSRotation: a token signed by a key the set did not have yet is
// accepted once the set is reloaded, and unknown kids reload it at most
// once per gap.
func TestJWKSRotation(t *testing.T) {
	k := signingKeys(t)
	newRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		doc     = jwksFor(map[string]any{"rsa1": &k.rsa.PublicKey})
		fetches atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(doc)
	}))
	defer srv.Close()
	jwks := NewJWKSURL(srv.URL, srv.Client(), time.Hour, nil)
	clock := time.Now()
	var clockMu sync.Mutex
	jwks.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := jwks.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tv, _ := NewTokenVerifier(TokenOptions{JWKS: jwks})
	tok := sign(t, jwt.SigningMethodRS256, newRSA, "rsa2", claimsAt(time.Now(), nil))

	mu.Lock()
	doc = jwksFor(map[string]any{"rsa1": &k.rsa.PublicKey, "rsa2": &newRSA.PublicKey})
	mu.Unlock()
	for i := 0; i < 5; i++ {
		if _, err := tv.Verify(tok); err == nil {
			t.Fatalf("Verify(new kid) right after a load = nil error, want refusal until the gap passes")
		}
	}
	if got := fetches.Load(); got != 1 {
		t.Fatalf("fetches within the gap = %d, want 1", got)
	}
	clockMu.Lock()
	clock = clock.Add(minRefreshGap + time.Second)
	clockMu.Unlock()
	if _, err := tv.Verify(tok); err != nil {
		t.Fatalf("Verify(new kid) after the gap = %v, want nil", err)
	}
	if got := fetches.Load(); got != 2 {
		t.Errorf("fetches = %d, want 2", got)
	}
}

func TestParseJWKSRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"NotJSON":    `nope`,
		"Empty":      `{"keys":[]}`,
		"WeakRSA":    `{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		"EncOnly":    `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"enc","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		"PrivateKey": `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}]}`,
	} {
		if _, err := parseJWKS([]byte(doc)); err == nil {
			t.Errorf("parseJWKS(%s) = nil error, want one", name)
		}
	}
}

// signWithHeader makes an HS256 token with one extra header field.
func signWithHeader(t testing.TB, name string, value any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header[name] = value
	s, err := tok.SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLayersClaim reads the layers claim: absent or null is every layer,
// an array of distinct ids or patterns is kept as it is, and anything else
// refuses the token with a detail saying what is wrong and not echoing it.
func TestLayersClaim(t *testing.T) {
	tv, err := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	many := make([]string, MaxLayers+1)
	for i := range many {
		many[i] = fmt.Sprintf("layer%d", i)
	}
	for _, tc := range []struct {
		name  string
		claim any // nil: no claim
		want  []string
		fault string // part of the detail of the 401; "" when accepted
	}{
		{"Absent", nil, nil, ""},
		{"Null", json.RawMessage("null"), nil, ""},
		{"Ids", []string{"places", "transit__Bus_Stops-1a2b3c"}, []string{"places", "transit__Bus_Stops-1a2b3c"}, ""},
		{"Pattern", []string{"transit__*"}, []string{"transit__*"}, ""},
		{"Most", many[:MaxLayers], many[:MaxLayers], ""},
		{"String", "places", nil, "it must be an array of strings"},
		{"Number", 7, nil, "it must be an array of strings"},
		{"Object", map[string]any{"places": true}, nil, "it must be an array of strings"},
		{"ArrayOfNumbers", []any{"places", 7}, nil, "it must be an array of strings"},
		{"EmptyArray", []string{}, nil, "the list is empty"},
		{"EmptyString", []string{"places", ""}, nil, "an entry is empty"},
		{"NullEntry", []any{"places", nil}, nil, "an entry is empty"},
		{"Duplicate", []string{"places", "places"}, nil, "an entry appears twice"},
		{"TooMany", many, nil, "the list has more than 64 entries"},
		{"TooLong", []string{strings.Repeat("a", MaxLayerPattern+1)}, nil, "an entry is longer than 256 characters"},
		{"NotAnID", []string{"secret-looking value"}, nil, "an entry is not a layer id or pattern"},
		{"BadPattern", []string{"zone[0-"}, nil, "an entry is not a layer id or pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(now, map[string]any{"iss": nil, "aud": nil, "layers": tc.claim}))
			id, err := tv.Verify(tok)
			if tc.fault == "" {
				if err != nil {
					t.Fatalf("Verify(layers %v) = %v, want nil", tc.claim, err)
				}
				if diff := cmp.Diff(tc.want, id.Layers); diff != "" || (tc.want == nil) != (id.Layers == nil) {
					t.Errorf("Verify(layers %v).Layers = %q, want %q (-want +got):\n%s", tc.claim, id.Layers, tc.want, diff)
				}
				return
			}
			got := apperr.MessageOf(err)
			want := "The bearer token has a malformed layers claim: " + tc.fault
			if apperr.KindOf(err) != apperr.Unauthenticated || !strings.HasPrefix(got, want) {
				t.Errorf("Verify(layers %v) = %q (kind %v), want Unauthenticated starting %q", tc.claim, got, apperr.KindOf(err), want)
			}
			if strings.Contains(got, "secret-looking") || strings.Contains(got, "zone") {
				t.Errorf("detail %q echoes the claim", got)
			}
		})
	}
}

// TestLayersClaimRefusedOverHTTP: a malformed layers claim is a rejected
// token like the other claim errors: 401 with error="invalid_token".
func TestLayersClaimRefusedOverHTTP(t *testing.T) {
	h := testRouter(newTokenAuthenticator(t))
	tok := sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claimsAt(time.Now(), map[string]any{"layers": []string{"roads", "roads"}}))
	res := do(t, h, "GET", "/within", map[string]string{"Authorization": "Bearer " + tok}, "")
	checkRejection(t, res, 401, "malformed layers claim: an entry appears twice", tok)
	if got := res.header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate = %q, want invalid_token", got)
	}
}

func TestMintHS256Layers(t *testing.T) {
	tv, _ := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret)})
	for _, tc := range []struct {
		name   string
		layers []string
	}{
		{"Every", nil},
		{"Some", []string{"roads", "transit__*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := MintHS256([]byte(testSecret), MintOptions{Subject: "dev", Scopes: []string{ScopeTilesRead}, Layers: tc.layers, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			id, err := tv.Verify(tok)
			if err != nil {
				t.Fatalf("Verify(minted) = %v", err)
			}
			if diff := cmp.Diff(tc.layers, id.Layers); diff != "" || (tc.layers == nil) != (id.Layers == nil) {
				t.Errorf("Verify(minted with layers %q).Layers = %q (-want +got):\n%s", tc.layers, id.Layers, diff)
			}
		})
	}
	if _, err := MintHS256([]byte(testSecret), MintOptions{Subject: "dev", Layers: []string{"a b"}, TTL: time.Minute}); apperr.KindOf(err) != apperr.Invalid {
		t.Errorf("MintHS256(layers [\"a b\"]) = %v, want Invalid", err)
	}
}
