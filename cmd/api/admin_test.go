package main

import (
	"context"
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
