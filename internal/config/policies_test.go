package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/ratelimit"
)

// TestPolicyTableInTheDocs: the table of built-in policies in
// docs/api/rate-limits.md has one row per row of Builtin, with its
// windows and algorithm, and none other.
func TestPolicyTableInTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api/rate-limits.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| `([^`]+)`[^|]* \\| ([a-z]+)")
	got := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got[m[1]] = [2]string{m[2], m[3]}
	}
	for _, b := range Builtin {
		want := [2]string{b.Windows, string(b.Algorithm)}
		if got[b.Name] != want {
			t.Errorf("docs/api/rate-limits.md says %s is %v, want %v", b.Name, got[b.Name], want)
		}
		delete(got, b.Name)
	}
	for name := range got {
		t.Errorf("docs/api/rate-limits.md lists policy %s, which is not built in", name)
	}
}

// TestDefaultPoliciesFromTheTable: every row of the table is a valid
// policy, and one of database time counts with the counter.
func TestDefaultPoliciesFromTheTable(t *testing.T) {
	ps := DefaultPolicies()
	if len(ps) != len(Builtin) {
		t.Fatalf("%d default policies from %d rows", len(ps), len(Builtin))
	}
	for name, p := range ps {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if p.Unit() == ratelimit.DBTime && p.Algorithm != ratelimit.Counter {
			t.Errorf("%s counts database time with %s, want counter", name, p.Algorithm)
		}
		if strings.Contains(name, " ") {
			t.Errorf("policy name %q", name)
		}
	}
}
