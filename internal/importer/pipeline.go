package importer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
)

// batchSize rows travel together from the parser to COPY, so that the
// channel costs little per row; a few batches in flight keep memory flat.
const batchSize = 1024

// pipeline parses and converts the input in its own goroutine while COPY
// streams the rows already converted. It implements pgx.CopyFromSource.
type pipeline struct {
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []row
	free   chan []row
	done   chan struct{}

	// Set by the parser goroutine, read after done is closed.
	err     error
	skipped int
	bad     []*FeatureError

	cur  []row
	pos  int
	id   int64
	vals [4]any
}

func newPipeline(ctx context.Context, src source, c *converter, skipBad bool, firstID int64) *pipeline {
	ctx, cancel := context.WithCancel(ctx)
	p := &pipeline{
		ctx: ctx, cancel: cancel,
		out:  make(chan []row, 4),
		free: make(chan []row, 6),
		done: make(chan struct{}),
		id:   firstID - 1,
	}
	go p.parse(src, c, skipBad)
	return p
}

func (p *pipeline) parse(src source, c *converter, skipBad bool) {
	defer close(p.done)
	defer close(p.out)
	batch := p.batch()
	var it item
	for {
		err := src.next(&it)
		if err == io.EOF {
			break
		}
		if err != nil {
			p.err = err
			return
		}
		r := &batch[len(batch):][:1][0]
		err = c.convert(&it, r)
		if err == nil {
			err = checkText(r)
		}
		if err != nil {
			fe := &FeatureError{Position: it.position(), Reason: err.Error()}
			if !skipBad {
				p.err = fe
				return
			}
			p.skipped++
			if len(p.bad) < maxReported {
				p.bad = append(p.bad, fe)
			}
			continue
		}
		if batch = batch[:len(batch)+1]; len(batch) == cap(batch) {
			if !p.send(batch) {
				return
			}
			batch = p.batch()
		}
	}
	if len(batch) > 0 {
		p.send(batch)
	}
}

func (p *pipeline) batch() []row {
	select {
	case b := <-p.free:
		return b[:0]
	default:
		return make([]row, 0, batchSize)
	}
}

func (p *pipeline) send(b []row) bool {
	select {
	case p.out <- b:
		return true
	case <-p.ctx.Done():
		p.err = p.ctx.Err()
		return false
	}
}

// Next moves to the next row, recycling a batch once COPY has encoded it.
func (p *pipeline) Next() bool {
	p.pos++
	if p.pos < len(p.cur) {
		return true
	}
	if p.cur != nil {
		select {
		case p.free <- p.cur:
		default:
		}
		p.cur = nil
	}
	b, ok := <-p.out
	if !ok {
		<-p.done // so that Err sees the parser's outcome
		return false
	}
	p.cur, p.pos = b, 0
	return true
}

// Values returns the current row: id, name, properties, geometry.
func (p *pipeline) Values() ([]any, error) {
	r := &p.cur[p.pos]
	p.id++
	p.vals[0], p.vals[1], p.vals[2], p.vals[3] = p.id, r.name, r.props, r.geom
	return p.vals[:], nil
}

// Err is the parser's error once it has ended; pgx calls it between
// chunks too, so it must not block.
func (p *pipeline) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// wait stops the parser if it is still running and returns its error.
func (p *pipeline) wait() error {
	p.cancel()
	for range p.out { // unblock a parser waiting to send
	}
	<-p.done
	if errors.Is(p.err, context.Canceled) && p.ctx.Err() != nil {
		return nil // stopped by wait itself after COPY failed or ended
	}
	return p.err
}

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
