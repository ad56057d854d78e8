package main

import "testing"

func TestFormerPage(t *testing.T) {
	sql := `SELECT w.c0 FROM (
  SELECT p.*, row_number() OVER () AS n
  FROM (SELECT l.id::text AS c0 FROM (SELECT l.* FROM public.places l WHERE l.geom && ST_MakeEnvelope($1, $2, $3, $4, 4326) ORDER BY l.id LIMIT $5::int) l ORDER BY l.id) p
) w WHERE w.before < $6::bigint ORDER BY w.n`
	want := `SELECT w.c0 FROM (
  SELECT p.*, row_number() OVER () AS n
  FROM (SELECT l.id::text AS c0 FROM public.places l WHERE l.geom && ST_MakeEnvelope($1, $2, $3, $4, 4326) ORDER BY l.id LIMIT $5::int) p
) w WHERE w.before < $6::bigint ORDER BY w.n`
	got, err := formerPage(sql)
	if err != nil || got != want {
		t.Errorf("formerPage:\ngot  %s (%v)\nwant %s", got, err, want)
	}
	if _, err := formerPage("SELECT 1"); err == nil {
		t.Error("formerPage of a statement without the subquery: no error")
	}
}
