package auth

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// secretKeys is a KeyVerifier over a fixed map of secrets.
type secretKeys map[string]Key

func (m secretKeys) Verify(_ context.Context, secret string) (Key, error) {
	k, ok := m[secret]
	if !ok {
		return Key{}, errInvalidKey
	}
	return k, nil
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestBasicCredentials: an API key sent as HTTP Basic credentials (key id
// and secret, or an empty id) is the key's identity; any other pair, and
// anything that is not Basic's encoding, is a 401.
func TestBasicCredentials(t *testing.T) {
	keys := secretKeys{"s3cret": {ID: "acme", Scopes: []string{ScopeProximityRead}}}
	h := testRouter(NewAuthenticator(Options{Keys: keys}))
	for _, tc := range []struct {
		name, authz string
		status      int
		want        string // limit key, or the detail of a refusal
	}{
		{"IDAndSecret", basic("acme", "s3cret"), 200, "key:acme"},
		{"EmptyID", basic("", "s3cret"), 200, "key:acme"},
		{"SchemeAnyCase", "bAsIc " + base64.StdEncoding.EncodeToString([]byte("acme:s3cret")), 200, "key:acme"},
		{"OtherKeysID", basic("other", "s3cret"), 401, "The API key is not valid."},
		{"WrongSecret", basic("acme", "nope"), 401, "The API key is not valid."},
		{"EmptySecret", basic("acme", ""), 401, "The x-api-key header is malformed."},
		{"NoColon", "Basic " + base64.StdEncoding.EncodeToString([]byte("acme")), 401, "Basic credentials must be"},
		{"NotBase64", "Basic !!!", 401, "Basic credentials must be"},
		{"Empty", "Basic", 401, "Basic credentials must be"},
		{"BadID", basic("a b", "s3cret"), 401, "Basic credentials must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, h, "GET", "/within", map[string]string{"Authorization": tc.authz}, "")
			if tc.status == 200 {
				if res.status != 200 || !strings.Contains(res.body, `"limit_key":"`+tc.want+`"`) {
					t.Errorf("GET /within with %s = %d %s, want 200 with limit key %s", tc.name, res.status, res.body, tc.want)
				}
				return
			}
			checkRejection(t, res, tc.status, tc.want, "s3cret")
		})
	}
}

// TestBasicChallenge: a 401 offers Basic to a client that tried it and to
// a browser's navigation without credentials, in a field of its own and
// first; never to a script or to a client that sent a key header or a
// bearer token, where a browser would pop up a dialog over the page.
func TestBasicChallenge(t *testing.T) {
	keys := secretKeys{"s3cret": {ID: "acme"}}
	h := testRouter(NewAuthenticator(Options{Keys: keys})) // no anonymous scopes
	for _, tc := range []struct {
		name   string
		header map[string]string
		basic  bool
	}{
		{"WrongBasic", map[string]string{"Authorization": basic("acme", "nope")}, true},
		{"MalformedBasic", map[string]string{"Authorization": "Basic !!!"}, true},
		{"NavigationWithout", map[string]string{"Sec-Fetch-Mode": "navigate"}, true},
		{"FetchWithout", map[string]string{"Sec-Fetch-Mode": "cors"}, false},
		{"NoBrowserWithout", nil, false},
		{"WrongKeyHeader", map[string]string{"x-api-key": "nope", "Sec-Fetch-Mode": "navigate"}, false},
		{"WrongBearer", map[string]string{"Authorization": "Bearer a.b.c", "Sec-Fetch-Mode": "navigate"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, h, "GET", "/within", tc.header, "")
			got := res.header.Values("WWW-Authenticate")
			if res.status != http.StatusUnauthorized || len(got) == 0 {
				t.Fatalf("GET /within = %d, WWW-Authenticate %q; want 401 with a challenge", res.status, got)
			}
			if offered := got[0] == BasicChallenge; offered != tc.basic {
				t.Errorf("WWW-Authenticate = %q; Basic first: %v, want %v", got, offered, tc.basic)
			}
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, "Bearer") }) {
				t.Errorf("WWW-Authenticate = %q, want the Bearer and ApiKey challenge too", got)
			}
		})
	}
}

// TestBasicMetrics: Basic credentials count as their own method.
func TestBasicMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	keys := secretKeys{"s3cret": {ID: "acme", Scopes: []string{ScopeProximityRead}}}
	h := testRouter(NewAuthenticator(Options{Keys: keys, Registerer: reg}))
	do(t, h, "GET", "/within", map[string]string{"Authorization": basic("acme", "s3cret")}, "")
	do(t, h, "GET", "/within", map[string]string{"Authorization": basic("acme", "nope")}, "")
	for _, tc := range []struct {
		result string
		want   float64
	}{{"ok", 1}, {"rejected", 1}} {
		if got := counterValue(t, reg, "basic", tc.result); got != tc.want {
			t.Errorf("geogate_auth_requests_total{basic,%s} = %v, want %v", tc.result, got, tc.want)
		}
	}
}
