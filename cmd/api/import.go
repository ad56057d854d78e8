package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/importer"
)

const importUsage = `usage: api import --layer places|geofences [flags] FILE

Loads FILE ("-" for stdin) into a layer. FILE is a GeoJSON FeatureCollection,
newline-delimited GeoJSON (one Feature per line) or a JSON array of cities
records ({"name","lat","lng","country","admin1","admin2"}), optionally
gzip-compressed; the format is detected from the content. The import runs in
one transaction: on a bad feature nothing is loaded, unless --skip-bad.

flags:
`

// importCmd is "api import": it loads one file into one layer and prints a
// summary line.
func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, importUsage); fs.PrintDefaults() }
	layer := fs.String("layer", "", "layer to load: places or geofences (required)")
	var o importer.Options
	fs.BoolVar(&o.Replace, "replace", false, "replace the layer's content in one transaction")
	fs.BoolVar(&o.IfEmpty, "if-empty", false, "do nothing when the layer already has rows")
	fs.BoolVar(&o.SkipBad, "skip-bad", false, "skip bad features and report them instead of rolling back")
	fs.StringVar(&o.NameProperty, "name-property", "", `GeoJSON property giving each feature's name (default: "name", "NAME" or "Name", else the first string property)`)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return errors.New("import: want exactly one FILE")
	}
	if o.Layer, err = importer.ParseLayer(*layer); err != nil {
		return fmt.Errorf("import: --layer: %w", err)
	}
	if o.Replace && o.IfEmpty {
		return errors.New("import: --replace and --if-empty exclude each other")
	}
	cfg, err := config.Load(getenv, config.NeedPostgres)
	if err != nil {
		return err
	}
	o.Schema = cfg.Catalog.Schemas[0] // where migrations made the layers' tables
	pool, err := openCLIPool(ctx, cfg, "geogate-import")
	if err != nil {
		return err
	}
	defer pool.Close()

	in, err := importer.Open(files[0], os.Stdin)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer in.Close()
	start := time.Now()
	stop := showProgress(in, stderr)
	res, err := importer.Import(ctx, pool, in, o)
	stop()
	secs := time.Since(start).Seconds()
	reportSkipped(stderr, res)
	if err != nil {
		return fmt.Errorf("import into %s rolled back, the layer is unchanged: %w", o.Layer, err)
	}
	name := files[0]
	if name == "-" {
		name = "stdin"
	}
	if res.NotEmpty {
		fmt.Fprintf(stdout, "%s already has rows; nothing imported from %s (--if-empty)\n", o.Layer, filepath.Base(name))
		return nil
	}
	fmt.Fprintf(stdout, "imported %d rows into %s in %.2f s (%.0f rows/s) from %s (%s)",
		res.Rows, o.Layer, secs, float64(res.Rows)/secs, filepath.Base(name), res.Format)
	if o.SkipBad {
		fmt.Fprintf(stdout, ", skipped %d bad features", res.Skipped)
	}
	if res.Repaired > 0 {
		fmt.Fprintf(stdout, ", repaired %d invalid polygons (ST_MakeValid)", res.Repaired)
	}
	fmt.Fprintln(stdout)
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// showProgress draws a progress bar over the bytes read when stderr is a
// terminal, and returns the function that removes it.
func showProgress(in *importer.Input, stderr io.Writer) (stop func()) {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}
	}
	bar := progressbar.NewOptions64(in.Size,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription("importing"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = bar.Set64(in.BytesRead())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		_ = bar.Finish()
		_ = bar.Clear()
	}
}

// reportSkipped lists the features skipped with --skip-bad.
func reportSkipped(w io.Writer, res importer.Result) {
	for _, fe := range res.Bad {
		fmt.Fprintf(w, "skipped %v\n", fe)
	}
	if more := res.Skipped - len(res.Bad); more > 0 {
		fmt.Fprintf(w, "... and %d more skipped features\n", more)
	}
}
