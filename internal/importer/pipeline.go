package importer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
)

// pipeline parses and converts the input in its own goroutine and writes
// the rows there as PostgreSQL's binary COPY stream, which COPY reads
// from the other end of a pipe: parsing, encoding and the server's work
// overlap, and memory holds only the pipe's buffers.
type pipeline struct {
	r    *io.PipeReader
	done chan struct{}

	// Set by the parser goroutine, read after done is closed.
	err     error
	rows    int64
	skipped int
	bad     []*FeatureError
}

func newPipeline(ctx context.Context, src source, c *converter, skipBad bool, firstID int64) *pipeline {
	r, w := io.Pipe()
	p := &pipeline{r: r, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = p.parse(ctx, src, c, skipBad, firstID, w)
		w.CloseWithError(p.err) // nil: a clean end of the stream
	}()
	return p
}

// copyHeader starts a binary COPY stream: signature, flags, extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func (p *pipeline) parse(ctx context.Context, src source, c *converter, skipBad bool, id int64, pw io.Writer) error {
	w := bufio.NewWriterSize(pw, 256<<10)
	w.Write(copyHeader)
	var (
		it  item
		r   row
		tup []byte
	)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := src.next(&it)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		err = c.convert(&it, &r)
		if err == nil {
			err = checkText(&r)
		}
		if err != nil {
			fe := &FeatureError{Position: it.position(), Reason: err.Error()}
			if !skipBad {
				return fe
			}
			p.skipped++
			if len(p.bad) < maxReported {
				p.bad = append(p.bad, fe)
			}
			continue
		}
		tup = appendTuple(tup[:0], id, &r)
		if _, err := w.Write(tup); err != nil {
			return err // COPY failed; its error tells why
		}
		id++
		p.rows++
	}
	w.Write([]byte{0xff, 0xff}) // trailer: a tuple of -1 fields
	return w.Flush()
}

// appendTuple appends one row in binary COPY format: id (int8), name
// (text), properties (jsonb, version 1), geom (EWKB).
func appendTuple(b []byte, id int64, r *row) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, 4)
	b = be.AppendUint32(b, 8)
	b = be.AppendUint64(b, uint64(id))
	b = be.AppendUint32(b, uint32(len(r.name)))
	b = append(b, r.name...)
	b = be.AppendUint32(b, uint32(len(r.props)+1))
	b = append(b, 1)
	b = append(b, r.props...)
	b = be.AppendUint32(b, uint32(len(r.geom)))
	return append(b, r.geom...)
}

// wait ends the parser, if COPY stopped reading early, and returns its
// error.
func (p *pipeline) wait() error {
	p.r.CloseWithError(errCopyEnded)
	<-p.done
	if errors.Is(p.err, errCopyEnded) {
		return nil // COPY's own error explains it
	}
	return p.err
}

var errCopyEnded = errors.New("copy ended")

// checkText rejects NUL characters, which PostgreSQL text and jsonb cannot
// hold.
func checkText(r *row) error {
	if strings.IndexByte(r.name, 0) >= 0 {
		return errors.New("name contains a NUL character")
	}
	if bytes.Contains(r.props, []byte(`\u0000`)) {
		return errors.New(`properties contain a NUL character (\u0000)`)
	}
	return nil
}
