package httpx

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// flushAt is how much of an answer an Answer holds before it sends the
// status and headers: an answer that fits (most pages) goes out whole,
// with its length and headers set last, and an error met before is
// answered as any error is.
const flushAt = 64 << 10

// Answer writes a 200 answer as it is made, holding at most flushAt
// bytes: however large a page, a request holds what it is writing and
// this buffer, not the page. Its first error sticks, and every later
// write does nothing.
type Answer struct {
	c   *gin.Context
	typ string
	buf []byte
	// written counts the bytes of the answer so far.
	written   int
	committed bool
	err       error
	// Header, when set, sets the answer's headers just before they are
	// sent.
	Header func()
}

// NewAnswer begins the answer to c, of media type typ.
func NewAnswer(c *gin.Context, typ string) *Answer { return &Answer{c: c, typ: typ} }

// Written is how many bytes the answer has so far.
func (w *Answer) Written() int { return w.written }

// Committed says whether the status and headers have been sent.
func (w *Answer) Committed() bool { return w.committed }

// Err is the answer's first error: a client that left, say.
func (w *Answer) Err() error { return w.err }

// Write adds p to the answer. What fits beside what is held is held;
// else what is held goes out, then p itself, never copied: a large piece
// (a feature's properties) is sent from where it lies.
func (w *Answer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.written += len(p)
	if len(w.buf)+len(p) < flushAt {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	w.flush()
	if len(p) < flushAt {
		w.buf = append(w.buf, p...)
	} else if w.err == nil {
		if _, err := w.c.Writer.Write(p); err != nil {
			w.err = err
		}
	}
	return len(p), w.err
}

func (w *Answer) WriteString(s string) (int, error) {
	if len(w.buf)+len(s) < flushAt && w.err == nil {
		w.buf = append(w.buf, s...)
		w.written += len(s)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

func (w *Answer) WriteByte(b byte) error {
	if len(w.buf)+1 < flushAt && w.err == nil {
		w.buf = append(w.buf, b)
		w.written++
		return nil
	}
	_, err := w.Write([]byte{b})
	return err
}

// flush sends what is held, the status and headers first.
func (w *Answer) flush() {
	if !w.committed {
		w.committed = true
		if w.Header != nil {
			w.Header()
		}
		w.c.Header("Content-Type", w.typ)
		w.c.Status(http.StatusOK)
	}
	if _, err := w.c.Writer.Write(w.buf); err != nil && w.err == nil {
		w.err = err
	}
	w.buf = w.buf[:0]
}

// Finish sends the rest of the answer: an answer held whole goes with
// its length.
func (w *Answer) Finish() {
	if w.err != nil {
		return
	}
	if !w.committed {
		w.c.Header("Content-Length", strconv.Itoa(len(w.buf)))
	}
	w.flush()
}

// Fail ends the request with err: answered as any error while nothing
// was sent; once the answer has begun, it is cut off (the connection
// aborted), so that a client never takes a part for the whole. A client
// that left is not written to at all.
func (w *Answer) Fail(err error) {
	switch {
	case !w.committed:
		Abort(w.c, err)
	case w.c.Request.Context().Err() != nil:
		w.c.Abort()
	default:
		Logger(w.c).Error("answer cut short", "status", http.StatusOK, "bytes", w.written, "err", err.Error())
		panic(http.ErrAbortHandler)
	}
}
