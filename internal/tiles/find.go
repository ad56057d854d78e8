package tiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
)

var (
	errOutside   = apperr.New(apperr.Forbidden, "This tile lies outside your spatial scope.")
	errRenderBad = apperr.New(apperr.Failed, "The tile could not be rendered: the layer's data or tile settings cannot be drawn at this address, and a retry will fail the same way. The service log says why.")
	errDBDown    = apperr.New(apperr.Unavailable, "The database is unavailable; try again shortly.")
)

// result is a rendered tile ready to serve.
type result struct {
	raw     []byte
	e       entry
	version int64
}

// part is one layer's share of a tile.
type part struct {
	l       *Layer
	res     result
	version int64 // the version a render must reach
	hit     bool
	// hash is what the part is cached under besides the layer and tile:
	// the spatial scope's hash and, for a layer that runs as its caller,
	// the hash of what its rows depend on; private says the part may be
	// neither cached nor shared with another request.
	hash    string
	private bool
	// callers says the part is what its caller may see, not everyone's.
	callers bool
}

// Found is a tile of some layers looked up in the cache: the layers whose
// tile the cache held, and those Render will draw.
type Found struct {
	t         Tile
	parts     []part
	scopeWKB  []byte
	scopeHash string
}

// Private says a layer of the tile is drawn as its caller: the tile is
// that caller's, not everyone's.
func (f *Found) Private() bool {
	return slices.ContainsFunc(f.parts, func(p part) bool { return p.callers })
}

// Hits are the ids of the layers whose tile came from the cache.
func (f *Found) Hits() []string { return f.layers(true) }

// Misses are the ids of the layers whose tile is to be rendered.
func (f *Found) Misses() []string { return f.layers(false) }

func (f *Found) layers(hit bool) []string {
	var out []string
	for _, p := range f.parts {
		if p.hit == hit {
			out = append(out, p.l.ID)
		}
	}
	return out
}

// Answer is a tile ready to send: its ETag, its gzip bytes and its MVT
// bytes, either of which may be missing (nil) while the other is there;
// both are nil for a tile without features. Hit says the cache held every
// layer's part.
type Answer struct {
	Hit  bool
	ETag string
	Gzip []byte
	MVT  []byte
}

// Find looks tile t of layers ls (each within its zoom range) up in the
// cache, as the caller whose spatial scope is scope (nil: the world) may
// see it: a tile outside the scope is refused, one across its edge is
// cut to it. partition, when not nil, names what a layer's tile for this
// caller is cached under besides (access.Settings.Partition): "" for a
// tile that is everyone's, access.NoCache for one to render afresh for
// this request alone.
func (s *Service) Find(ctx context.Context, ls []*Layer, t Tile, scope *spatial.Scope, partition func(layer string) string) (*Found, error) {
	f := &Found{t: t, parts: make([]part, len(ls))}
	if scope != nil {
		minLng, minLat, maxLng, maxLat := t.Bounds(float64(s.r.buffer) / float64(s.r.extent))
		switch {
		case !scope.IntersectsBBox(minLng, minLat, maxLng, maxLat):
			for _, l := range ls {
				s.metrics.answer(l.ID, "outside")
			}
			return nil, errOutside
		case !scope.ContainsBBox(minLng, minLat, maxLng, maxLat):
			f.scopeWKB, f.scopeHash = scope.WKB(), scope.Hash()
		}
	}
	for i, l := range ls {
		p := part{l: l, hash: f.scopeHash}
		if partition != nil {
			pt := partition(l.ID)
			p.callers = pt != ""
			switch pt {
			case "":
			case access.NoCache:
				p.private = true
			default:
				sum := sha256.Sum256([]byte(pt))
				p.hash += ":c:" + hex.EncodeToString(sum[:12])
			}
		}
		if p.private {
			f.parts[i] = p
			continue
		}
		e, version, hit, err := s.cache.get(ctx, l, t, p.hash)
		if err != nil {
			s.log.Debug("tile cache unavailable", "err", err.Error())
		}
		p.res, p.version, p.hit = result{e: e, version: version}, version, hit
		f.parts[i] = p
	}
	return f, nil
}

// Render draws the parts of f the cache did not hold, at the same time,
// and returns the tile. A composite tile is its layers' tiles one after
// the other, which MVT allows (a tile is a list of layers).
func (s *Service) Render(ctx context.Context, f *Found) (Answer, error) {
	if err := s.renderParts(ctx, f); err != nil {
		return Answer{}, s.renderFailed(ctx, err)
	}
	a := Answer{Hit: true}
	for _, p := range f.parts {
		a.Hit = a.Hit && p.hit
	}
	if len(f.parts) == 1 {
		res := f.parts[0].res
		a.ETag, a.Gzip, a.MVT = res.e.ETag, res.e.Gzip, res.raw
		return a, nil
	}
	raw, err := concat(f.parts)
	if err != nil {
		return Answer{}, err
	}
	a.ETag, a.MVT = etag(raw), raw
	return a, nil
}

// renderFailed is the answer to a render that failed with err. As for
// every query of the service (see pg.Runner), the error decides, not the
// clock: a cancellation while the caller still waits is the render
// timeout, a 504 like every deadline; a database out of reach is a 503
// worth retrying; any other error is the layer's data or settings failing
// the statement, which no retry mends, so it is a 500 that does not say
// "try again".
func (s *Service) renderFailed(ctx context.Context, err error) error {
	switch {
	case apperr.KindOf(err) != apperr.Internal:
		return err
	case pg.IsCancellation(err) && ctx.Err() != nil:
		return err // the client went away
	case pg.IsCancellation(err):
		return apperr.Wrap(apperr.Timeout, fmt.Sprintf("The tile took longer than %s to render and was cancelled.", s.s.RenderTimeout), err)
	case pg.IsConnectErr(err):
		return apperr.Wrap(apperr.Unavailable, apperr.MessageOf(errDBDown), err)
	}
	return apperr.Wrap(apperr.Failed, apperr.MessageOf(errRenderBad), err)
}

// renderParts renders the parts the cache did not hold, at the same time,
// and counts every part's answer.
func (s *Service) renderParts(ctx context.Context, f *Found) error {
	parts, t := f.parts, f.t
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	first := -1
	for i := range parts {
		p := &parts[i]
		if p.hit {
			s.metrics.answer(p.l.ID, "hit")
			continue
		}
		if first < 0 {
			first = i // rendered on this goroutine, below
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, errs[i] = s.renderPart(ctx, p, t, f.scopeWKB)
		}()
	}
	if first >= 0 {
		p := &parts[first]
		p.res, errs[first] = s.renderPart(ctx, p, t, f.scopeWKB)
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case parts[i].hit:
		case err != nil:
			s.metrics.answer(parts[i].l.ID, "error")
		default:
			s.metrics.answer(parts[i].l.ID, "miss")
		}
	}
	return errors.Join(errs...)
}

// concat is the composite tile of parts: their MVT bytes in order.
func concat(parts []part) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		raw := p.res.raw
		if raw == nil {
			var err error
			if raw, err = decompress(p.res.e.Gzip); err != nil {
				return nil, err
			}
		}
		out = append(out, raw...)
	}
	return out, nil
}

// renderPart renders p's layer of t: for this request alone when p is
// private, else once for every request that wants it (render).
func (s *Service) renderPart(ctx context.Context, p *part, t Tile, scopeWKB []byte) (result, error) {
	if !p.private {
		return s.render(ctx, p.l, t, scopeWKB, p.hash, p.version)
	}
	s.renders.Add(1)
	rctx, cancel := context.WithTimeout(ctx, s.s.RenderTimeout)
	defer cancel()
	start := time.Now()
	// On the primary: with no version to hold a replica's render to, a
	// replica could draw it from before a write that has answered.
	out, err := s.r.Render(pg.WithMinLSN(rctx, math.MaxUint64), p.l, t, scopeWKB)
	if err != nil {
		return result{}, err
	}
	s.metrics.rendered(p.l.ID, t.Z, time.Since(start))
	return result{raw: out.MVT, e: entry{ETag: etag(out.MVT)}, version: out.Version}, nil
}

// render renders t once however many requests want it at the same
// version at the same time on this replica (and, through the cache's
// claim, across replicas), and caches the result. The render belongs to
// none of its callers (flights): it goes on while any of them waits, and
// each that gets the tile pays its share of the database time. It is
// admitted as the first caller, though: should the fair queue turn that
// caller away, the others ask again, each as itself.
func (s *Service) render(ctx context.Context, l *Layer, t Tile, scopeWKB []byte, scopeHash string, version int64) (result, error) {
	key := l.cacheName + "|" + t.String() + "|" + scopeHash + "|" + strconv.FormatInt(version, 10)
	for attempt := 1; ; attempt++ {
		res, err, led := s.flights.do(ctx, key, func(work context.Context) (result, error) {
			return s.renderOnce(work, l, t, scopeWKB, scopeHash, version)
		})
		if err != nil && !led && ctx.Err() == nil && leaderOnly(err) && attempt < 3 {
			continue // the first caller's own refusal: render as ourselves
		}
		return res, err
	}
}

// leaderOnly says whether err, met by a shared render, was the first
// caller's alone: the fair queue turned it away, or it was cancelled.
func leaderOnly(err error) bool {
	return errors.Is(err, context.Canceled) || apperr.KindOf(err) == apperr.Reduced
}

// renderOnce renders t, unless another replica is rendering it at the same
// version, in which case it waits for that replica's result.
func (s *Service) renderOnce(ctx context.Context, l *Layer, t Tile, scopeWKB []byte, scopeHash string, version int64) (result, error) {
	e, done, lock := s.cache.claim(ctx, l, t, scopeHash, version)
	if done {
		return result{e: e, version: version}, nil
	}
	defer func() {
		if lock != "" { // held until set releases it with the tile
			s.cache.unlock(ctx, lock)
		}
	}()
	s.renders.Add(1)
	rctx, cancel := context.WithTimeout(ctx, s.s.RenderTimeout)
	defer cancel()
	start := time.Now()
	out, err := s.r.Render(rctx, l, t, scopeWKB)
	if err == nil && l.versionKey != "" && out.Version < version {
		// Drawn on a replica that has not replayed the change behind
		// version: draw it again where it has, so that no tile older than
		// the version it is served and cached under ever leaves here.
		s.metrics.staleRender()
		out, err = s.r.Render(pg.WithMinLSN(rctx, math.MaxUint64), l, t, scopeWKB)
	}
	if err != nil {
		return result{}, err
	}
	s.metrics.rendered(l.ID, t.Z, time.Since(start))
	if l.versionKey == "" {
		out.Version = version // the cache period it was rendered in
	} else {
		s.versions.raise(l.versionKey, out.Version)
	}
	res := result{raw: out.MVT, e: entry{ETag: etag(out.MVT)}, version: out.Version}
	if err := s.cache.set(context.WithoutCancel(ctx), l, t, scopeHash, &res, lock); err != nil {
		s.log.Debug("tile not cached", "err", err.Error())
	} else {
		lock = ""
	}
	return res, nil
}
