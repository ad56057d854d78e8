package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// walkthrough is the shell block of doc between the markers
// <!-- name --> and <!-- /name -->.
func walkthrough(t *testing.T, doc, name string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- "+name+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no walk-through %s", doc, name)
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	return strings.TrimSuffix(block, "```")
}

// expected are the outputs a walk-through says its commands print: each
// comment line right after a command's last line.
func expected(block string) []string {
	var out []string
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "# ") || i == 0 {
			continue
		}
		prev := strings.TrimSpace(lines[i-1])
		if prev != "" && !strings.HasPrefix(prev, "#") {
			out = append(out, strings.TrimPrefix(l, "# "))
		}
	}
	return out
}

// TestPart4WalkThrough runs the curl walk-through of writing features in
// docs/api/ogc.md exactly as written, against a service holding its
// sites table, and holds what it prints to what the page says.
func TestPart4WalkThrough(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	if _, err := pool.Exec(context.Background(), `CREATE TABLE public.sites (id int PRIMARY KEY, name text, geom geometry(Point, 4326))`); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "layers.yaml")
	if err := os.WriteFile(file, []byte("layers:\n  sites:\n    write: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "LAYERS_CONFIG": file, "AUTH_ANONYMOUS_SCOPES": "none"}
	key := runCLI(t, env, "keys", "create", "--name", "walk-"+testenv.Prefix(t), "--scopes", "features:read,features:write")
	base, _ := startService(t, env)
	block := walkthrough(t, filepath.Join("..", "..", "docs", "api", "ogc.md"), "part4-walkthrough")
	script := strings.ReplaceAll(block, "localhost:8000", strings.TrimPrefix(base, "http://"))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := expected(block)
	if len(got) != len(want) {
		t.Fatalf("the walk-through printed %q, the page says %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: printed %s, the page says %s", i+1, got[i], want[i])
		}
	}
}
