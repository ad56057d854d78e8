package catalog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Catalog holds the published layers and keeps them current: it looks at
// a fingerprint of the catalog every interval and discovers again when it
// changed (a table created, altered, dropped, granted or indexed), or at
// once on Refresh.
type Catalog struct {
	db  *pgxpool.Pool
	s   Settings
	log *slog.Logger

	layers atomic.Pointer[index]
	print  string // the fingerprint layers were found under
	mu     sync.Mutex
	subs   []func([]*Layer)
	// soon is set while a RefreshSoon waits to run.
	soon atomic.Bool
}

// index is one discovery's layers, in order and by id.
type index struct {
	list []*Layer
	byID map[string]*Layer
}

// Open discovers the layers of db and returns a Catalog that looks for
// changes every s.Refresh until ctx ends.
func Open(ctx context.Context, db *pgxpool.Pool, s Settings, log *slog.Logger) (*Catalog, error) {
	if log == nil {
		log = slog.Default()
	}
	c := &Catalog{db: db, s: s, log: log}
	if _, err := c.Refresh(ctx); err != nil {
		return nil, err
	}
	if s.Refresh > 0 {
		go c.watch(ctx)
	}
	return c, nil
}

// Layers returns the published layers, in schema, relation and column
// order. The slice and the layers must not be changed.
func (c *Catalog) Layers() []*Layer { return c.layers.Load().list }

// Layer returns the layer called id, or nil.
func (c *Catalog) Layer(id string) *Layer { return c.layers.Load().byID[id] }

// OnChange calls f with the new layers after every discovery that changed
// them (not for the first).
func (c *Catalog) OnChange(f func([]*Layer)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, f)
}

// Refresh discovers the layers again when the catalog's fingerprint
// changed, and reports whether it did.
func (c *Catalog) Refresh(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	print, err := Fingerprint(ctx, c.db, c.s)
	if err != nil {
		return false, err
	}
	if print == c.print && c.layers.Load() != nil {
		return false, nil
	}
	ls, err := Discover(ctx, c.db, c.s)
	if err != nil {
		return false, err
	}
	first := c.layers.Load() == nil
	ix := &index{list: ls, byID: make(map[string]*Layer, len(ls))}
	for _, l := range ls {
		ix.byID[l.ID] = l
	}
	c.layers.Store(ix)
	c.print = print
	for _, l := range ls {
		if !l.Indexed {
			c.log.Warn("layer has no spatial index: its queries read the whole relation", "layer", l.ID,
				"relation", l.Schema+"."+l.Table, "column", l.Column)
		}
	}
	if !first {
		c.log.Info("layers changed", "layers", len(ls))
		for _, f := range c.subs {
			f(ls)
		}
	}
	return true, nil
}

// RefreshSoon refreshes in the background, once however many ask before
// it starts: queries that found a layer dropped or altered under them call
// it, and there may be many at once.
func (c *Catalog) RefreshSoon() {
	if !c.soon.CompareAndSwap(false, true) {
		return
	}
	go func() {
		c.soon.Store(false) // a change seen from now on asks again
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.Refresh(ctx); err != nil {
			c.log.Warn("layers not refreshed", "err", err.Error())
		}
	}()
}

func (c *Catalog) watch(ctx context.Context) {
	t := time.NewTicker(c.s.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("layers not refreshed", "err", err.Error())
		}
	}
}

// fingerprintSQL hashes what discovery reads of the relations in the
// schemas $1: their names, kinds, owners' grants, inheritance, columns and
// types, indexes, triggers (and whether they are enabled) and whether they
// were analysed, so that any change a layer would show changes it; and the
// tables of geogate's schema $2, where the subdivided copies of layers
// appear and vanish. It reads the catalog only, no table.
const fingerprintSQL = `
SELECT md5(coalesce(string_agg(x, '|' ORDER BY x), '')) FROM (
	SELECT c.oid::text || c.relname::text || c.relkind::text || coalesce(c.relacl::text, '') || c.relhassubclass::text ||
		(SELECT coalesce(string_agg(a.attnum::text || a.attname::text || a.atttypid::text || a.atttypmod::text || a.attnotnull::text ||
			coalesce(a.attacl::text, '') || a.attisdropped::text, ',' ORDER BY a.attnum), '')
		 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0) ||
		(SELECT coalesce(string_agg(i.indexrelid::text || i.indkey::text || i.indisprimary::text || i.indisunique::text, ','
			ORDER BY i.indexrelid), '') FROM pg_index i WHERE i.indrelid = c.oid) ||
		(SELECT coalesce(string_agg(t.oid::text || t.tgfoid::text || t.tgenabled::text, ',' ORDER BY t.oid), '')
		 FROM pg_trigger t WHERE t.tgrelid = c.oid) ||
		coalesce((SELECT 's' FROM pg_statistic s WHERE s.starelid = c.oid LIMIT 1), '')
		AS x
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
	UNION ALL
	SELECT 'own ' || c.oid::text || c.relname::text || coalesce(c.relacl::text, '')
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $2 AND c.relkind = 'r'
) f`

// Fingerprint is a hash of the catalog entries that decide the layers of
// s: it changes when they may have.
func Fingerprint(ctx context.Context, db *pgxpool.Pool, s Settings) (string, error) {
	var print string
	err := db.QueryRow(ctx, fingerprintSQL, s.Schemas, s.Own).Scan(&print)
	return print, err
}
