package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/tiles"
)

const publishUsage = `usage: api publish                              list the published layers
       api publish --invalidate [TABLE...]        retire a table's cached tiles at every commit
       api publish --contains [TABLE...]          subdivide a table's polygons for /geofences/contains
       api publish --remove [--contains] [TABLE...]  undo --invalidate (with --contains, undo --contains)

A TABLE is schema.table, a table of the first of PUBLISH_SCHEMAS, or a
layer id (GET /layers); none means every published table. --invalidate
installs two statement-level triggers on each table and alters nothing
else. --contains builds, for each polygon layer of a table, a subdivided
copy of its polygons in geogate's schema and four statement-level
triggers that keep it exact; writers of the table wait while it is
built. Running services notice within PUBLISH_REFRESH.
`

// publishCmd lists the layers, or installs or removes exact tile
// invalidation or subdivided copies on published tables, printing what it
// did to each.
func publishCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, publishUsage) }
	invalidate := fs.Bool("invalidate", false, "install exact tile invalidation")
	contains := fs.Bool("contains", false, "install subdivided copies of polygon layers (with --remove: remove them)")
	remove := fs.Bool("remove", false, "remove exact tile invalidation, or with --contains the subdivided copies")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *invalidate && *remove {
		return errors.New("publish: --invalidate and --remove exclude each other")
	}
	cfg, err := config.Load(getenv, config.NeedPostgres)
	if err != nil {
		return err
	}
	pool, err := openCLIPool(ctx, cfg, "geogate-publish")
	if err != nil {
		return err
	}
	defer pool.Close()
	layers, err := catalog.Discover(ctx, pool, cfg.Catalog)
	if err != nil {
		return err
	}
	if !*invalidate && !*remove && !*contains {
		if fs.NArg() > 0 {
			return errors.New("publish: tables are named only with --invalidate, --contains or --remove")
		}
		return listLayers(stdout, layers)
	}
	first, own := cfg.Catalog.Schemas[0], cfg.DB.Schema
	if *invalidate || *remove && !*contains {
		tables, err := publishTargets(fs.Args(), layers, first)
		if err != nil {
			return err
		}
		change := tiles.InstallInvalidation
		if *remove {
			change = tiles.RemoveInvalidation
		}
		if err := applyEach(ctx, stdout, pool, own, tables, change); err != nil || !*contains {
			return err
		}
	}
	targets, err := containsTargets(fs.Args(), layers, first)
	if err != nil {
		return err
	}
	change := geofence.InstallParts
	if *remove {
		change = geofence.RemoveParts
	}
	return applyLayers(ctx, stdout, pool, own, targets, len(fs.Args()) > 0, change)
}

type table struct{ schema, name string }

func (t table) String() string { return t.schema + "." + t.name }

// publishTargets resolves the named tables, or lists every published
// table (not views) when none is named.
func publishTargets(names []string, layers []*catalog.Layer, first string) ([]table, error) {
	var out []table
	seen := map[table]bool{}
	add := func(t table) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if len(names) == 0 {
		for _, l := range layers {
			if l.Kind == "table" || l.Kind == "partitioned table" {
				add(table{l.Schema, l.Table})
			}
		}
		if len(out) == 0 {
			return nil, errors.New("publish: no published table")
		}
		return out, nil
	}
	for _, n := range names {
		t, ok := resolveTable(n, layers, first)
		if !ok {
			return nil, fmt.Errorf("publish: %q is neither a published layer nor a published schema.table (api publish lists them)", n)
		}
		add(t)
	}
	return out, nil
}

func resolveTable(name string, layers []*catalog.Layer, first string) (table, bool) {
	for _, l := range layers {
		if l.ID == name || l.Schema+"."+l.Table == name || (l.Schema == first && l.Table == name) {
			return table{l.Schema, l.Table}, true
		}
	}
	return table{}, false
}

// containsTargets are the polygon layers of the named tables, or of every
// published table when none is named.
func containsTargets(names []string, layers []*catalog.Layer, first string) ([]*catalog.Layer, error) {
	var out []*catalog.Layer
	if len(names) == 0 {
		for _, l := range layers {
			if l.Polygonal() && (l.Kind == "table" || l.Kind == "partitioned table") {
				out = append(out, l)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("publish: no published table has polygons")
		}
		return out, nil
	}
	tables, err := publishTargets(names, layers, first)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		n := len(out)
		for _, l := range layers {
			if l.Schema == t.schema && l.Table == t.name && l.Polygonal() {
				out = append(out, l)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("publish: %s has no polygon layer: /geofences/contains tests polygons", t)
		}
	}
	return out, nil
}

// applyLayers runs change on every layer, printing one line per layer,
// and fails at the end if any failed. Unless the layers were named, one
// that cannot have a copy (geofence.ErrNoCopy) is skipped, not failed.
func applyLayers(ctx context.Context, stdout io.Writer, pool *pgxpool.Pool, own string, layers []*catalog.Layer, named bool,
	change func(context.Context, *pgxpool.Pool, string, *catalog.Layer) (string, error)) error {
	failed := 0
	for _, l := range layers {
		name := l.Schema + "." + l.Table + "." + l.Column
		did, err := change(ctx, pool, own, l)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: %s\n", name, did)
		case !named && errors.Is(err, geofence.ErrNoCopy):
			fmt.Fprintf(stdout, "%s: skipped, %v; containment reads the table through its index\n", name, err)
		default:
			failed++
			fmt.Fprintf(stdout, "%s: not changed: %v\n", name, err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("publish: %d of %d layers not changed", failed, len(layers))
	}
	return nil
}

// applyEach runs change on every table, printing one line per table, and
// fails at the end if any failed.
func applyEach(ctx context.Context, stdout io.Writer, pool *pgxpool.Pool, own string, tables []table,
	change func(context.Context, *pgxpool.Pool, string, string, string) (string, error)) error {
	failed := 0
	for _, t := range tables {
		did, err := change(ctx, pool, own, t.schema, t.name)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%s: not changed: %v\n", t, strings.TrimPrefix(err.Error(), t.String()+": "))
			continue
		}
		fmt.Fprintf(stdout, "%s: %s\n", t, did)
	}
	if failed > 0 {
		return fmt.Errorf("publish: %d of %d tables not changed", failed, len(tables))
	}
	return nil
}

// listLayers prints every published layer, how its tiles are retired and
// how point-in-polygon checks read it.
func listLayers(stdout io.Writer, layers []*catalog.Layer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LAYER\tCOLUMN\tKIND\tGEOMETRY\tSRID\tSPATIAL INDEX\tTILES\tCONTAINS")
	for _, l := range layers {
		inv := "ttl"
		if l.Invalidated {
			inv = "exact"
		}
		idx := "no"
		if l.Indexed {
			idx = "yes"
		}
		contains := l.ContainsPath()
		if contains == "" {
			contains = "-"
		}
		fmt.Fprintf(w, "%s\t%s.%s.%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l.ID, l.Schema, l.Table, l.Column, l.Kind, l.GeometryType, l.SRID, idx, inv, contains)
	}
	return w.Flush()
}
