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
	base, env := demoSites(t, filepath.Join(t.TempDir(), "layers.yaml"))
	key := runCLI(t, env, "keys", "create", "--name", "walk-"+testenv.Prefix(t), "--scopes", "features:read,features:write")
	runWalkThrough(t, base, filepath.Join("..", "..", "docs", "api", "ogc.md"), "part4-walkthrough", "KEY="+key)
}

// TestREADMEPart4WalkThrough runs the README's write walk-through exactly
// as written, against a service set up as make run sets it up: the
// demo's sites table and layer file, and the key demo.
func TestREADMEPart4WalkThrough(t *testing.T) {
	base, env := demoSites(t, filepath.Join("..", "..", "configs", "demo-layers.yaml"))
	runCLI(t, env, "keys", "create", "--name", "demo", "--secret", "demo", "--scopes", "all", "--replace")
	runWalkThrough(t, base, filepath.Join("..", "..", "README.md"), "readme-part4")
}

// demoSites starts the service on the demo data with the demo's sites
// table (data/demo-sites.sql) and the layer file layers, written first
// when it does not exist, opening sites for writing.
func demoSites(t *testing.T, layers string) (base string, env map[string]string) {
	t.Helper()
	pool, dbURL := testenv.DemoDBWithURL(t)
	ddl, err := os.ReadFile(filepath.Join("..", "..", "data", "demo-sites.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), string(ddl)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(layers); os.IsNotExist(err) {
		if err := os.WriteFile(layers, []byte("layers:\n  sites:\n    write: true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env = map[string]string{"DATABASE_URL": dbURL, "LAYERS_CONFIG": layers, "AUTH_ANONYMOUS_SCOPES": "none"}
	base, _ = startService(t, env)
	return base, env
}

// runWalkThrough runs the walk-through name of doc with bash against the
// service at base, with env added, and holds what it prints to what the
// page says.
func runWalkThrough(t *testing.T, base, doc, name string, env ...string) {
	t.Helper()
	block := walkthrough(t, doc, name)
	script := strings.ReplaceAll(block, "localhost:8000", strings.TrimPrefix(base, "http://"))
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), env...)
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
