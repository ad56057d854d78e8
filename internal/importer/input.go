package importer

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Input is an opened source file: its decompressed content, its size on
// disk when known, and a counter of the bytes read so far from disk.
type Input struct {
	io.Reader
	// Size is the size of the file on disk, or -1 for stdin and pipes.
	Size  int64
	read  *countingReader
	close func() error
}

// BytesRead returns how many bytes have been read from the underlying file
// (compressed bytes for gzip input), for progress display.
func (in *Input) BytesRead() int64 { return in.read.n.Load() }

// Close closes the file.
func (in *Input) Close() error { return in.close() }

// Open opens path ("-" for stdin) and decompresses it on the fly when it
// starts with the gzip magic bytes, whatever its name.
func Open(path string, stdin io.Reader) (*Input, error) {
	var (
		f     io.Reader = stdin
		size  int64     = -1
		close           = func() error { return nil }
	)
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if st, err := file.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		f, close = file, file.Close
	}
	return wrap(f, size, close)
}

func wrap(f io.Reader, size int64, close func() error) (*Input, error) {
	cr := &countingReader{r: f}
	br := bufio.NewReaderSize(cr, 256<<10)
	in := &Input{Reader: br, Size: size, read: cr, close: close}
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			close()
			return nil, fmt.Errorf("gzip: %w", err)
		}
		in.Reader = bufio.NewReaderSize(zr, 256<<10)
		in.close = func() error {
			zr.Close()
			return close()
		}
	}
	return in, nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
