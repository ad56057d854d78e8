package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestImportCommand drives `api import` as a user would, in order, on one
// database: each step's output and error matter, and so does the layer
// left behind.
func TestImportCommand(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `[{"name":"a","lat":"1","lng":"2"},{"name":"b","lat":"3","lng":"4"}]`)
	bad := write("bad.ndjson", `{"type":"Feature","properties":{"name":"c"},"geometry":{"type":"Point","coordinates":[1,2]}}
{"type":"Feature","properties":{"name":"d"},"geometry":{"type":"Point","coordinates":[1,-92]}}
`)
	steps := []struct {
		name     string
		args     []string
		wantOut  string
		wantErr  string
		wantRows int
	}{
		{"no layer", []string{good}, "", "--layer", 0},
		{"unknown layer", []string{"--layer", "roads", good}, "", `unknown layer "roads"`, 0},
		{"no file", []string{"--layer", "places"}, "", "exactly one FILE", 0},
		{"exclusive flags", []string{"--layer", "places", "--replace", "--if-empty", good}, "", "exclude each other", 0},
		{"missing file", []string{"--layer", "places", filepath.Join(dir, "nope.json")}, "", "no such file", 0},
		{"load", []string{"--layer", "places", good}, "imported 2 rows into places in ", "", 2},
		{"if-empty", []string{good, "--layer", "places", "--if-empty"}, "places already has rows; nothing imported from good.json (--if-empty)", "", 2},
		{"bad feature", []string{"--layer", "places", "--replace", bad}, "", "import into places rolled back, the layer is unchanged: line 2 (feature 1): latitude -92 is outside [-90, 90]", 2},
		{"skip bad", []string{"--layer", "places", "--replace", "--skip-bad", bad}, "imported 1 rows into places", "", 1},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		getenv := envMap(map[string]string{"DATABASE_URL": dbURL})
		err := run(context.Background(), append([]string{"import"}, s.args...), getenv, &stdout, &stderr)
		switch {
		case s.wantErr == "" && err != nil:
			t.Errorf("%s: run(%q) error = %v, want none", s.name, s.args, err)
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
			t.Errorf("%s: run(%q) error = %v, want one containing %q", s.name, s.args, err, s.wantErr)
		}
		if !strings.Contains(stdout.String(), s.wantOut) {
			t.Errorf("%s: run(%q) printed %q, want %q", s.name, s.args, stdout.String(), s.wantOut)
		}
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM places").Scan(&n); err != nil || n != s.wantRows {
			t.Errorf("%s: places has %d rows (%v), want %d", s.name, n, err, s.wantRows)
		}
	}
}
