package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// windowLimit is the limit of the first window of policy that GET
// /rate_limit on base reports for the caller holding key, and what the
// caller used of it.
func windowLimit(t *testing.T, base, key, policy string) (limit, used int) {
	t.Helper()
	st, _, body := call(t, "GET", base+"/rate_limit", key, "")
	if st != http.StatusOK {
		t.Fatalf("GET /rate_limit = %d %s", st, body)
	}
	var a quotaAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Policies {
		if p.Policy == policy && len(p.Windows) > 0 {
			return p.Windows[0].Limit, p.Windows[0].Used
		}
	}
	t.Fatalf("GET /rate_limit names no policy %s: %s", policy, body)
	return 0, 0
}

// metricLine returns the line of the Prometheus text at base that starts
// with prefix, or "".
func metricLine(t *testing.T, base, prefix string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func fileVersion(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// TestPolicyFileReloadOnSIGHUP runs the service as a process, changes its
// policy file and sends SIGHUP: the new windows hold at once, what the
// unchanged log counted survives, the metrics name the file's version; a
// broken file then keeps the running policies and says why in the log and
// the metrics. The process keeps running throughout.
func TestPolicyFileReloadOnSIGHUP(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	file := filepath.Join(t.TempDir(), "ratelimit.yaml")
	write := func(s string) []byte {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	first := write("policies:\n  geofence:\n    windows: 3/1m\n")
	key := "reload-" + testenv.Prefix(t)
	runCLI(t, map[string]string{"DATABASE_URL": dbURL}, "keys", "create", "--name", key, "--secret", key, "--scopes", "geofences:read")
	p := startProcess(t, map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": testenv.Getenv(t, "TEST_REDIS_URL"), "RATELIMIT_CONFIG": file,
	})
	for range 2 {
		if st, _, body := call(t, "GET", p.base+"/geofences?limit=1", key, ""); st != http.StatusOK {
			t.Fatalf("GET /geofences = %d %s", st, body)
		}
	}
	if lim, used := windowLimit(t, p.base, key, "geofence"); lim != 3 || used != 2 {
		t.Fatalf("before the reload: limit %d used %d, want 3 and 2", lim, used)
	}
	info := `geogate_ratelimit_config_info{version="` + fileVersion(first) + `"} 1`
	if got := metricLine(t, p.base, "geogate_ratelimit_config_info"); got != info {
		t.Errorf("info metric = %q, want %q", got, info)
	}

	second := write("policies:\n  geofence:\n    windows: 5/1m\n")
	if err := p.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the reloaded limit", func() bool {
		lim, _ := windowLimit(t, p.base, key, "geofence")
		return lim == 5
	})
	if _, used := windowLimit(t, p.base, key, "geofence"); used != 2 {
		t.Errorf("after the reload the window holds %d, want the 2 it counted before", used)
	}
	info = `geogate_ratelimit_config_info{version="` + fileVersion(second) + `"} 1`
	if got := metricLine(t, p.base, "geogate_ratelimit_config_info"); got != info {
		t.Errorf("info metric = %q, want %q", got, info)
	}

	write("policies:\n  geofence:\n    windows: [\n")
	if err := p.signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the broken file refused", func() bool {
		return metricLine(t, p.base, `geogate_ratelimit_config_reloads_total{result="error"}`) != ""
	})
	if got := metricLine(t, p.base, "geogate_ratelimit_config_last_reload_ok"); got != "geogate_ratelimit_config_last_reload_ok 0" {
		t.Errorf("last reload metric = %q, want 0", got)
	}
	if lim, _ := windowLimit(t, p.base, key, "geofence"); lim != 5 {
		t.Errorf("after a broken file the limit is %d, want the running 5", lim)
	}
	if got := metricLine(t, p.base, "geogate_ratelimit_config_info"); got != info {
		t.Errorf("info metric after a broken file = %q, want %q", got, info)
	}
	if logs := p.logs.String(); !strings.Contains(logs, "rate-limit policies not reloaded") || !strings.Contains(logs, "policy file") {
		t.Errorf("the log does not say why the file was refused:\n%s", tail(logs, 2000))
	}
}

// TestOverridesReachEveryReplica runs three services on one database and
// changes a tier's and a key's windows through the admin routes of one:
// every replica decides by them within a second (told by the database:
// the overrides' poll is an hour), the key's beating its tier's, and
// each change is in the audit trail.
func TestOverridesReachEveryReplica(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none", "API_KEY_CACHE_TTL": "1h",
		"RATELIMIT_GEOFENCE": "3/1m", "OVERRIDES_POLL": "1h",
	}
	ops := "ops-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	target := "tiered-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", target, "--secret", target, "--scopes", "geofences:read", "--tier", "gold")
	bases := make([]string, 3)
	for i := range bases {
		bases[i], _ = startService(t, env)
	}
	admin := func(replica int, method, path, body string, want int) {
		t.Helper()
		if st, _, got := call(t, method, bases[replica]+path, ops, body); st != want {
			t.Fatalf("%s %s on replica %d = %d %s, want %d", method, path, replica, st, got, want)
		}
	}
	everywhere := func(what string, want int) {
		t.Helper()
		for i := range bases {
			testenv.WaitFor(t, time.Second, fmt.Sprintf("replica %d: %s", i, what), func() bool {
				lim, _ := windowLimit(t, bases[i], target, "geofence")
				return lim == want
			})
		}
	}
	everywhere("the policy's own 3/1m", 3)
	admin(0, "PUT", "/admin/tiers/gold", `{"overrides":{"geofence":"7/1m"}}`, http.StatusOK)
	everywhere("the tier's 7/1m", 7)
	admin(1, "PATCH", "/admin/keys/"+target, `{"overrides":{"geofence":"11/1m"}}`, http.StatusOK)
	everywhere("the key's 11/1m over its tier's", 11)

	// The limiter decides by it, across the replicas, exactly.
	statuses := map[int]int{}
	for i := range 12 {
		st, _, _ := call(t, "GET", bases[i%3]+"/geofences?limit=1", target, "")
		statuses[st]++
	}
	if statuses[http.StatusOK] != 11 || statuses[http.StatusTooManyRequests] != 1 {
		t.Errorf("12 requests under 11/1m over three replicas: %v, want 11 200s and one 429", statuses)
	}

	admin(2, "PATCH", "/admin/keys/"+target, `{"overrides":null}`, http.StatusOK)
	everywhere("the tier's 7/1m again", 7)
	admin(0, "DELETE", "/admin/tiers/gold", "", http.StatusNoContent)
	everywhere("the policy's 3/1m again", 3)
	admin(1, "DELETE", "/admin/tiers/gold", "", http.StatusNotFound)

	for _, bad := range []struct{ path, body, where string }{
		{"/admin/tiers/gold", `{"overrides":{"geofence":"200000/1s"}}`, "overrides"},
		{"/admin/tiers/gold", `{"overrides":{"nope":"1/1s"}}`, "nope"},
		{"/admin/tiers/gold", `{"overrides":{"geofence":"1/1x"}}`, "geofence"},
		{"/admin/tiers/gold", `{"windows":{}}`, "windows"},
		{"/admin/tiers/-gold", `{"overrides":{}}`, "tier"},
	} {
		st, _, got := call(t, "PUT", bases[0]+bad.path, ops, bad.body)
		if st != http.StatusUnprocessableEntity || !strings.Contains(string(got), `"detail"`) || !strings.Contains(string(got), bad.where) {
			t.Errorf("PUT %s %s = %d %s, want a 422 naming %s", bad.path, bad.body, st, got, bad.where)
		}
	}

	st, _, got := call(t, "GET", bases[2]+"/admin/audit?limit=3", ops, "")
	var audit struct {
		Entries []struct {
			Action string  `json:"action"`
			Tier   *string `json:"tier"`
			KeyID  *string `json:"key_id"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(got, &audit); st != http.StatusOK || err != nil || len(audit.Entries) != 3 {
		t.Fatalf("GET /admin/audit = %d %s", st, got)
	}
	e := audit.Entries
	if e[0].Action != "delete-tier" || e[0].Tier == nil || *e[0].Tier != "gold" || e[0].KeyID != nil ||
		e[1].Action != "update" || e[1].KeyID == nil || *e[1].KeyID != target {
		t.Errorf("newest audit entries = %s, want delete-tier of gold, then the key's update", got)
	}
}

// TestKeyUsage reads a key's tally: the requests the limiter admitted
// and refused today, per policy, counted in the deciding script.
func TestKeyUsage(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none", "RATELIMIT_GEOFENCE": "2/1m"}
	ops := "ops-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	key := "used-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "geofences:read")
	base, _ := startService(t, env)
	for range 5 {
		call(t, "GET", base+"/geofences?limit=1", key, "")
	}
	st, _, got := call(t, "GET", base+"/admin/keys/"+key+"/usage?days=2", ops, "")
	var u struct {
		Days     int `json:"days"`
		KeptDays int `json:"kept_days"`
		Usage    []struct {
			Day      string `json:"day"`
			Policy   string `json:"policy"`
			Admitted int    `json:"admitted"`
			Refused  int    `json:"refused"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(got, &u); st != http.StatusOK || err != nil {
		t.Fatalf("usage = %d %s", st, got)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	// The database budget is spent by the two admitted requests only:
	// the three refused by geofence spend nothing on it.
	byPolicy := map[string][2]int{}
	for _, e := range u.Usage {
		if e.Day == today {
			byPolicy[e.Policy] = [2]int{e.Admitted, e.Refused}
		}
	}
	if u.Days != 2 || u.KeptDays != 35 || len(u.Usage) != 2 || byPolicy["geofence"] != [2]int{2, 3} || byPolicy["database"] != [2]int{2, 0} {
		t.Errorf("usage = %s, want today's geofence: 2 admitted, 3 refused; database: 2 admitted", got)
	}
	for _, bad := range []struct {
		path string
		want int
	}{
		{"/admin/keys/" + key + "/usage?days=0", http.StatusUnprocessableEntity},
		{"/admin/keys/" + key + "/usage?days=37", http.StatusUnprocessableEntity},
		{"/admin/keys/" + key + "/usage?days=x", http.StatusUnprocessableEntity},
		{"/admin/keys/nobody-" + testenv.Prefix(t) + "/usage", http.StatusNotFound},
	} {
		if st, _, got := call(t, "GET", base+bad.path, ops, ""); st != bad.want || !strings.Contains(string(got), `"detail"`) {
			t.Errorf("GET %s = %d %s, want %d with a detail", bad.path, st, got, bad.want)
		}
	}
}
