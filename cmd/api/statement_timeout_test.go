package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// TestServePoolStatementTimeout reads, through /within on a layer that
// reports its connection's settings, the statement_timeout of the pool
// that serves requests. The rule behind the default is tested in
// internal/config, the setting itself in internal/pg.
func TestServePoolStatementTimeout(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"Default", nil, "12s"}, // TILES_RENDER_TIMEOUT 10s + 2s
		{"Set", map[string]string{"DB_STATEMENT_TIMEOUT": "1m"}, "1min"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := placesDB(t)
			_, err := pool.Exec(context.Background(), `CREATE VIEW public.session_settings AS
				SELECT id, name, jsonb_build_object('statement_timeout', current_setting('statement_timeout')) AS properties, geom
				FROM places`)
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"DATABASE_URL": url}
			for k, v := range tt.env {
				env[k] = v
			}
			base, _ := startService(t, env)
			req, _ := http.NewRequest("GET", base+"/within?lng=2.35&lat=48.85&radius=1000&limit=1&layer=session_settings", nil)
			resp, body := getJSON(t, req)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /within on session_settings = %d %v, want 200", resp.StatusCode, body)
			}
			var fc struct {
				Features []struct {
					Properties struct {
						StatementTimeout string `json:"statement_timeout"`
					} `json:"properties"`
				} `json:"features"`
			}
			b, _ := json.Marshal(body)
			if err := json.Unmarshal(b, &fc); err != nil || len(fc.Features) != 1 {
				t.Fatalf("GET /within on session_settings = %s, want one feature", b)
			}
			if got := fc.Features[0].Properties.StatementTimeout; got != tt.want {
				t.Errorf("statement_timeout of the serving pool = %q, want %q", got, tt.want)
			}
		})
	}
}
