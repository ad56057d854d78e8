package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestLogsHoldNoSecrets sends good and bad API keys and bearer tokens and
// checks that no secret, token or signing key reaches the service's logs.
func TestLogsHoldNoSecrets(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	const jwtSecret = "logs-test-signing-key-0123456789abcdef"
	env := map[string]string{
		"DATABASE_URL":     dbURL,
		"REDIS_URL":        testenv.Getenv(t, "TEST_REDIS_URL"),
		"JWT_HS256_SECRET": jwtSecret,
		"LOG_LEVEL":        "debug",
	}
	id := "logs-" + testenv.Prefix(t)
	secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read")
	token := runCLI(t, env, "token", "--sub", "logs-"+id, "--scopes", "proximity:read", "--ttl", "5m")
	const fakeKey = "gg_nobody_f4k3s3cr3tv4lu3"
	const fakeToken = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLWJ5dGVz"
	base, logs := startService(t, env)

	for _, h := range []struct{ name, value string }{
		{"x-api-key", secret}, {"x-api-key", fakeKey},
		{"Authorization", "Bearer " + token}, {"Authorization", "Bearer " + fakeToken},
	} {
		req, _ := http.NewRequest("GET", base+"/within?lng=13.4&lat=52.5&radius=500", nil)
		req.Header.Set(h.name, h.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	time.Sleep(100 * time.Millisecond) // the access log line follows the answer
	got := logs.String()
	if !strings.Contains(got, `"route":"/within"`) {
		t.Fatalf("no access log lines for /within; logs:\n%s", got)
	}
	for name, s := range map[string]string{
		"API key secret": secret, "unknown key": fakeKey, "token": token,
		"bad token": fakeToken, "signing key": jwtSecret,
	} {
		if strings.Contains(got, s) {
			t.Errorf("logs contain the %s %q", name, s)
		}
	}
}
