package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Client sends HTTP/1.1 requests over one keep-alive connection per
// worker and reads just what a load generator needs from each answer: the
// status, and the body to its end. On loopback, net/http's client costs
// the machine several times the CPU of the server work it measures, which
// on 2 shared cores would weigh on the server; this one costs about what
// wrk does. It is not safe to share a worker number between goroutines.
type Client struct {
	addr  string
	host  string
	conns []*conn
}

type conn struct {
	c  net.Conn
	br *bufio.Reader
	wb []byte
}

// NewClient returns a client for base ("http://127.0.0.1:8000") with
// connections for workers 0..workers-1.
func NewClient(base string, workers int) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("load: %q is not an http:// base URL", base)
	}
	return &Client{addr: u.Host, host: u.Host, conns: make([]*conn, workers)}, nil
}

// Header lines are "Name: value" strings, sent as they are.
type Header []string

// Get sends GET target ("/within?lng=1&lat=2") from worker w and returns
// the status.
func (c *Client) Get(w int, target string, h Header) (int, error) {
	return c.Do(w, "GET", target, h, nil)
}

// Do sends one request from worker w and reads its answer. A broken
// connection is closed; the worker's next request dials a new one.
func (c *Client) Do(w int, method, target string, h Header, body []byte) (int, error) {
	cn := c.conns[w]
	if cn == nil {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			return 0, err
		}
		cn = &conn{c: nc, br: bufio.NewReaderSize(nc, 64<<10)}
		c.conns[w] = cn
	}
	status, keep, err := cn.roundTrip(c.host, method, target, h, body)
	if err != nil || !keep {
		cn.c.Close()
		c.conns[w] = nil
	}
	return status, err
}

// Close closes every connection.
func (c *Client) Close() {
	for i, cn := range c.conns {
		if cn != nil {
			cn.c.Close()
			c.conns[i] = nil
		}
	}
}

func (cn *conn) roundTrip(host, method, target string, h Header, body []byte) (status int, keep bool, err error) {
	b := cn.wb[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for _, line := range h {
		b = append(b, line...)
		b = append(b, "\r\n"...)
	}
	if body != nil {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, body...)
	cn.wb = b
	if _, err := cn.c.Write(b); err != nil {
		return 0, false, err
	}
	return readResponse(cn.br, method == "HEAD")
}

var errMalformed = errors.New("load: malformed HTTP response")

// readResponse reads one response and discards its body.
func readResponse(br *bufio.Reader, head bool) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, errMalformed
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	length, chunked, keep := int64(-1), false, true
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return status, false, err
		}
		if len(line) <= 2 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil {
				return status, false, errMalformed
			}
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			keep = !asciiEqualFold(value, "close")
		}
	}
	switch {
	case head || status == 204 || status == 304:
		return status, keep, nil
	case chunked:
		return status, keep, discardChunks(br)
	case length >= 0:
		_, err = br.Discard(int(length))
		return status, keep, err
	}
	// No length: the body runs to the end of the connection.
	_, err = io.Copy(io.Discard, br)
	return status, false, err
}

func discardChunks(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		size, err := strconv.ParseInt(string(sizeText), 16, 64)
		if err != nil {
			return errMalformed
		}
		if size == 0 {
			for { // trailers, then the blank line
				line, err = br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(line) <= 2 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(size) + 2); err != nil {
			return err
		}
	}
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i]|0x20, s[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}
