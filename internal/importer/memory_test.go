package importer_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/importer"
	"github.com/geogate/geogate/internal/testenv"
)

// featureStream generates n NDJSON features of about 8 KB on the fly;
// every 50th is valid, the others have a latitude out of range, so the
// whole stream is parsed while the database receives little.
type featureStream struct {
	n, i int
	buf  []byte
	pad  string
}

func (s *featureStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.i == s.n {
			return 0, io.EOF
		}
		lat := 95
		if s.i%50 == 0 {
			lat = 45
		}
		s.buf = fmt.Appendf(s.buf[:0], `{"type":"Feature","properties":{"name":"f%d","pad":%q},"geometry":{"type":"Point","coordinates":[10,%d]}}`+"\n", s.i, s.pad, lat)
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// TestImportMemoryIsFlat streams 40 MB through the importer and checks
// that the heap stays far below the input's size.
func TestImportMemoryIsFlat(t *testing.T) {
	pool := testenv.DB(t)
	const n = 5000
	src := &featureStream{n: n, pad: strings.Repeat("x", 8000)}
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	res, err := importer.Import(context.Background(), pool, src, importer.Options{Layer: importer.Places, SkipBad: true})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != n/50 || res.Skipped != n-n/50 {
		t.Errorf("Import() = %d rows, %d skipped; want %d, %d", res.Rows, res.Skipped, n/50, n-n/50)
	}
	const limit = 16 << 20 // the input is about 40 MB
	if p := peak.Load(); p > limit {
		t.Errorf("peak heap in use = %d MB, want under %d MB", p>>20, limit>>20)
	}
	t.Logf("peak heap in use: %d MB for %d MB of input", peak.Load()>>20, n*8100>>20)
}
