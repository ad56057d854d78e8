package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// TestKeysCLIAudited: the keys command goes through the admin service:
// rotate prints a new secret while the old one keeps working for the
// grace period, and every change is in the audit trail as the CLI's, by
// the operating-system user, without secrets.
func TestKeysCLIAudited(t *testing.T) {
	ctx := context.Background()
	pool, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "USER": "fallback-user"}
	first := runCLI(t, env, "keys", "create", "--name", "cli-k", "--scopes", "tiles:read", "--notes", "for the audit")
	second := runCLI(t, env, "keys", "rotate", "--grace", "1h", "cli-k")
	if !strings.HasPrefix(second, "gg_cli-k_") || second == first {
		t.Fatalf("keys rotate printed %q, want a new gg_cli-k_ secret", second)
	}
	s := auth.NewStore(pool)
	for _, secret := range []string{first, second} {
		k, err := s.ByHash(ctx, auth.HashSecret(secret))
		if err == nil {
			err = k.Usable(time.Now())
		}
		if err != nil {
			t.Errorf("secret %.10s... after a rotation with a grace period: %v, want usable", secret, err)
		}
	}
	runCLI(t, env, "keys", "revoke", "cli-k")
	runCLI(t, env, "keys", "create", "--name", "cli-k", "--scopes", "tiles:read", "--replace")
	if list := runCLI(t, env, "keys", "list"); !strings.Contains(list, "cli-k") || !strings.Contains(list, "active") {
		t.Errorf("keys list = %q, want cli-k active again", list)
	}

	who := "cli:fallback-user"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = "cli:" + u.Username
	}
	out := runCLI(t, env, "keys", "audit", "--key", "cli-k")
	lines := strings.Split(out, "\n")
	var actions []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 || f[2] != who || f[3] != "-" || f[5] != "cli-k" {
			t.Errorf("audit line %q: want %s, no client address, key cli-k", l, who)
			continue
		}
		actions = append(actions, f[4])
	}
	if diff := cmp.Diff([]string{"replace", "revoke", "rotate", "create"}, actions); diff != "" {
		t.Errorf("audited actions, newest first (-want +got):\n%s\n%s", diff, out)
	}
	for _, secret := range []string{first, second} {
		if strings.Contains(out, secret) {
			t.Errorf("keys audit shows a secret:\n%s", out)
		}
	}
	if got := runCLI(t, env, "keys", "audit", "--key", "cli-k", "--limit", "1"); len(strings.Split(got, "\n")) != 2 {
		t.Errorf("keys audit --limit 1 = %q, want a header and one entry", got)
	}
}

// TestAdminRoutesNeedAdminScope: every route under /admin/ requires the
// admin scope, and none answers without it: 401 to a caller without
// credentials (even with every read scope granted to anonymous callers),
// 403 to a key holding every scope but admin, and neither to an admin.
func TestAdminRoutesNeedAdminScope(t *testing.T) {
	var adminRoutes []route
	for _, r := range servedRoutes(t) {
		if !strings.HasPrefix(r.path, "/admin/") {
			continue
		}
		if r.scope != auth.ScopeAdmin {
			t.Errorf("%s %s requires %q, want %q", r.method, r.path, r.scope, auth.ScopeAdmin)
		}
		adminRoutes = append(adminRoutes, r)
	}
	if len(adminRoutes) < 7 {
		t.Fatalf("%d admin routes, want at least 7", len(adminRoutes))
	}
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "proximity:read,geofences:read,geofences:write,tiles:read,features:read"}
	ops := "ops-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	var allButAdmin []string
	for _, sc := range auth.AllScopes {
		if sc != auth.ScopeAdmin {
			allButAdmin = append(allButAdmin, sc)
		}
	}
	user := ops + "-user"
	runCLI(t, env, "keys", "create", "--name", user, "--secret", user, "--scopes", strings.Join(allButAdmin, ","))
	// The key the routes with an id act on (the admin revokes it on the
	// way; a rotation of it is then a 409, an answer too).
	target := ops + "-target"
	runCLI(t, env, "keys", "create", "--name", target, "--scopes", "tiles:read")
	base, _ := startService(t, env)

	for _, r := range adminRoutes {
		path := strings.ReplaceAll(strings.ReplaceAll(r.path, ":id", target), ":tier", "gold")
		body := ""
		switch {
		case r.method == "PUT":
			body = `{"overrides":{"geofence":"5/1s"}}`
		case r.method == "POST" && strings.HasSuffix(path, "/rotate"):
			body = `{"grace":"1h"}`
		case r.method == "POST":
			body = `{"id":"made-` + testenv.Prefix(t) + `","scopes":["tiles:read"]}`
		case r.method == "PATCH":
			body = `{"notes":"seen by an admin"}`
		}
		for _, tc := range []struct {
			who, key string
			want     int // 0: neither 401 nor 403
		}{
			{"Anonymous", "", http.StatusUnauthorized},
			{"WithoutAdmin", user, http.StatusForbidden},
			{"Admin", ops, 0},
		} {
			t.Run(r.method+r.path+"/"+tc.who, func(t *testing.T) {
				status, h, got := call(t, r.method, base+path, tc.key, body)
				switch {
				case tc.want == 0 && (status == 401 || status == 403 || status >= 500):
					t.Errorf("%s %s as an admin = %d %.200s, want it served", r.method, path, status, got)
				case tc.want != 0 && status != tc.want:
					t.Errorf("%s %s %s = %d %.200s, want %d", tc.who, r.method, path, status, got, tc.want)
				case tc.want == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "":
					t.Errorf("401 without WWW-Authenticate")
				case tc.want == http.StatusForbidden && !strings.Contains(h.Get("WWW-Authenticate"), `scope="admin"`):
					t.Errorf("403 WWW-Authenticate = %q, want it to name the admin scope", h.Get("WWW-Authenticate"))
				}
			})
		}
	}
}

// TestAdminChangesReachEveryReplica runs three services on one database,
// each caching keys for an hour, and changes a key through the admin
// routes of one: the others hold to the change within a second, told by
// the database, not by their caches' TTL.
func TestAdminChangesReachEveryReplica(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":          dbURL,
		"AUTH_ANONYMOUS_SCOPES": "none",
		"API_KEY_CACHE_TTL":     "1h",
		"RATELIMIT_GEOFENCE":    "100000/1s",
	}
	ops := "ops-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	bases := make([]string, 3)
	for i := range bases {
		bases[i], _ = startService(t, env)
	}
	// status is what replica i answers a read of /geofences with secret.
	status := func(i int, secret string) int {
		st, _, _ := call(t, "GET", bases[i]+"/geofences?limit=1", secret, "")
		return st
	}
	adminCall := func(replica int, method, path, body string) map[string]any {
		t.Helper()
		st, _, got := call(t, method, bases[replica]+path, ops, body)
		if st != http.StatusOK && st != http.StatusCreated {
			t.Fatalf("%s %s on replica %d = %d %s", method, path, replica, st, got)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	everyReplica := func(what string, secret string, want int) {
		t.Helper()
		for i := range bases {
			testenv.WaitFor(t, time.Second, fmt.Sprintf("replica %d answering %d: %s", i, want, what), func() bool {
				return status(i, secret) == want
			})
		}
	}

	created := adminCall(0, "POST", "/admin/keys", `{"id":"target","scopes":["geofences:read"]}`)
	secret, _ := created["secret"].(string)
	everyReplica("the new key", secret, http.StatusOK) // and cached for an hour

	adminCall(1, "PATCH", "/admin/keys/target", `{"scopes":["tiles:read"]}`)
	everyReplica("the key without geofences:read", secret, http.StatusForbidden)
	adminCall(2, "PATCH", "/admin/keys/target", `{"scopes":["geofences:read"]}`)
	everyReplica("the key with geofences:read again", secret, http.StatusOK)

	rotated := adminCall(0, "POST", "/admin/keys/target/rotate", `{"grace":"1h"}`)
	next, _ := rotated["secret"].(string)
	everyReplica("the new secret", next, http.StatusOK)
	everyReplica("the old secret within its grace period", secret, http.StatusOK)
	adminCall(1, "POST", "/admin/keys/target/rotate", `{"grace":"0s"}`)
	everyReplica("the secret rotated away without grace", next, http.StatusUnauthorized)

	fresh := adminCall(2, "POST", "/admin/keys", `{"id":"revoked","scopes":["geofences:read"]}`)
	doomed, _ := fresh["secret"].(string)
	everyReplica("the key to revoke", doomed, http.StatusOK)
	adminCall(0, "DELETE", "/admin/keys/revoked", "")
	everyReplica("the revoked key", doomed, http.StatusUnauthorized)
}
