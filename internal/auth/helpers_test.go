package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
)

const testSecret = "test-secret-0123456789abcdef0123456789"

// testKeys are signing keys shared by the tests; RSA generation is slow.
type testKeys struct {
	rsa     *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
	ed      ed25519.PrivateKey
	rsaPEM  []byte // the RSA public key, PEM, as an attacker would find it
	jwksDoc []byte
}

var (
	keysOnce sync.Once
	keysVal  testKeys
)

func signingKeys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		var k testKeys
		var err error
		if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
		der, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
		k.rsaPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		k.jwksDoc = jwksFor(map[string]any{"rsa1": &k.rsa.PublicKey, "ec1": &k.ec.PublicKey, "ed1": k.ed.Public()})
		keysVal = k
	})
	return keysVal
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksFor renders public keys as a JSON Web Key Set.
func jwksFor(keys map[string]any) []byte {
	var list []map[string]string
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			list = append(list, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			raw, _ := k.Bytes()
			list = append(list, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])})
		case ed25519.PublicKey:
			list = append(list, map[string]string{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(k)})
		}
	}
	out, _ := json.Marshal(map[string]any{"keys": list})
	return out
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// sign makes a token with method, key and optional kid over claims.
func sign(t testing.TB, m jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// testRouter serves a few routes guarded like the real ones. /within
// echoes the identity, or refuses a circle outside the spatial scope.
func testRouter(a *Authenticator) *gin.Engine { return testRouterBehind(a, httpx.TrustedProxies{}) }

// testRouterBehind is testRouter behind the proxies trusted.
func testRouterBehind(a *Authenticator, trusted httpx.TrustedProxies) *gin.Engine {
	r := httpx.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, trusted)
	r.Use(a.middleware())
	r.GET("/within", require(ScopeProximityRead), func(c *gin.Context) {
		id := FromContext(c.Request.Context())
		if !id.Spatial.ContainsCircle(13.4, 52.5, 500) {
			httpx.Abort(c, apperr.New(apperr.Forbidden, "The query circle leaves your spatial scope."))
			return
		}
		ctxID := FromContext(c.Request.Context())
		c.JSON(http.StatusOK, gin.H{"limit_key": id.LimitKey(), "kind": id.Kind, "tier": id.Tier, "ctx_kind": ctxID.Kind, "scopes": id.Scopes})
	})
	r.POST("/geofences", require(ScopeGeofencesWrite), func(c *gin.Context) { c.Status(http.StatusCreated) })
	return r
}

type response struct {
	status int
	header http.Header
	body   string
	detail any
}

func do(t testing.TB, h http.Handler, method, path string, header map[string]string, remote string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if remote != "" {
		req.RemoteAddr = remote
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	res := response{status: w.Code, header: w.Header(), body: w.Body.String()}
	var d struct {
		Detail any `json:"detail"`
	}
	if json.Unmarshal(w.Body.Bytes(), &d) == nil {
		res.detail = d.Detail
	}
	return res
}

// checkRejection checks the shape every refused request shares: status,
// a {"detail": "..."} body that leaks no credential and no library text,
// and WWW-Authenticate on 401.
func checkRejection(t *testing.T, res response, wantStatus int, wantDetail string, secrets ...string) {
	t.Helper()
	if res.status != wantStatus {
		t.Fatalf("status = %d, want %d (body %s)", res.status, wantStatus, res.body)
	}
	detail, ok := res.detail.(string)
	if !ok {
		t.Fatalf("body = %s, want {\"detail\": string}", res.body)
	}
	if !strings.Contains(detail, wantDetail) {
		t.Errorf("detail = %q, want it to contain %q", detail, wantDetail)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(res.body, s) {
			t.Errorf("body %s leaks a credential", res.body)
		}
	}
	for _, leak := range []string{"crypto/", "rsa", "ecdsa", "verification error", "token is malformed", "token is expired", "token is unverifiable", "token has invalid", "signature is invalid", "pgx", "SQLSTATE", "sql"} {
		if strings.Contains(strings.ToLower(res.body), leak) {
			t.Errorf("body %s leaks library text %q", res.body, leak)
		}
	}
	if wantStatus == http.StatusUnauthorized && res.header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate")
	}
}
