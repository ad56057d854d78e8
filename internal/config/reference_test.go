package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// referenceNames returns the settings docs/configuration.md lists: the
// backticked name in the first cell of each table row.
func referenceNames(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var names []string
	for _, line := range strings.Split(string(doc), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// readNames returns every variable Load asks for, with the names made per
// policy and per tile layer written as the reference writes them:
// RATELIMIT_<POLICY>, TILES_<LAYER>_TABLE.
func readNames(t *testing.T) []string {
	t.Helper()
	asked := map[string]bool{}
	_, _ = Load(func(name string) string {
		asked[name] = true
		return ""
	}, NeedPostgres, NeedRedis)
	var layers []string
	for _, l := range legacyTileLayers {
		layers = append(layers, strings.ToUpper(l))
	}
	seen := map[string]bool{}
	var names []string
	for name := range asked {
		switch rest, ok := strings.CutPrefix(name, "RATELIMIT_"); {
		case ok && rest != "CONFIG":
			name = "RATELIMIT_<POLICY>"
		default:
			for _, l := range layers {
				if field, ok := strings.CutPrefix(name, "TILES_"+l+"_"); ok {
					name = "TILES_<LAYER>_" + field
				}
			}
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// TestConfigurationReference: docs/configuration.md lists every variable
// Load reads, once, and nothing else.
func TestConfigurationReference(t *testing.T) {
	documented, read := referenceNames(t), readNames(t)
	if len(read) < 40 {
		t.Fatalf("Load read only %d names; the recording is broken", len(read))
	}
	count := map[string]int{}
	for _, n := range documented {
		count[n]++
	}
	for _, n := range read {
		if count[n] == 0 {
			t.Errorf("config.Load reads %s, which docs/configuration.md does not list", n)
		}
	}
	for n, c := range count {
		if !slices.Contains(read, n) {
			t.Errorf("docs/configuration.md lists %s, which config.Load does not read", n)
		}
		if c > 1 {
			t.Errorf("docs/configuration.md lists %s %d times", n, c)
		}
	}
}
