package config

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goPackage is what go list says of one package.
type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// listPackages lists the module's non-test packages with go list.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "github.com/geogate/geogate/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the listing is broken", len(pkgs))
	}
	return pkgs
}

// TestConfigurationFlowsOneWay: config fills the settings types of the
// packages under internal/; none of them imports config, and none but
// config (and the test helpers) reads the environment or the YAML policy
// file.
func TestConfigurationFlowsOneWay(t *testing.T) {
	const module = "github.com/geogate/geogate/"
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if !strings.HasPrefix(rel, "internal/") || rel == "internal/config" {
			continue
		}
		if slices.Contains(p.Imports, module+"internal/config") {
			t.Errorf("%s imports internal/config; it should take its own settings type instead", rel)
		}
		if rel == "internal/testenv" {
			continue // reads TEST_DATABASE_URL and TEST_REDIS_URL for the tests
		}
		if slices.Contains(p.Imports, "github.com/goccy/go-yaml") && rel != "internal/openapi" {
			t.Errorf("%s imports a YAML parser; configuration files are read by internal/config", rel)
		}
		for _, f := range p.GoFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range []string{"os.Getenv", "os.LookupEnv", "os.Environ", "RATELIMIT_"} {
				if strings.Contains(string(src), call) {
					t.Errorf("%s/%s uses %s; the environment is read by internal/config only", rel, f, call)
				}
			}
		}
	}
}
