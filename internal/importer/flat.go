package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// elements splits a top-level JSON array into its elements' raw bytes
// without decoding them: the fast path for large arrays of flat records.
type elements struct {
	br  *bufio.Reader
	buf []byte
	end bool
}

// next returns the next element, valid until the following call, or
// io.EOF after the closing bracket.
func (e *elements) next() ([]byte, error) {
	if e.end {
		return nil, io.EOF
	}
	c, err := e.skipSpace()
	if err != nil {
		return nil, err
	}
	if c == ']' {
		e.end = true
		return nil, e.trailing()
	}
	e.buf = e.buf[:0]
	if err := e.value(c); err != nil {
		return nil, err
	}
	c, err = e.skipSpace()
	if err != nil {
		return nil, err
	}
	switch c {
	case ',':
	case ']':
		e.br.UnreadByte()
	default:
		return nil, fmt.Errorf("invalid JSON: %q after an array element", c)
	}
	return e.buf, nil
}

func (e *elements) skipSpace() (byte, error) {
	for {
		c, err := e.br.ReadByte()
		if err != nil {
			return 0, unexpectedEOF(err)
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return c, nil
		}
	}
}

// value copies one JSON value starting with c into buf. It tracks strings
// and nesting only; the element is validated when it is parsed.
func (e *elements) value(c byte) error {
	depth := 0
	for {
		e.buf = append(e.buf, c)
		switch c {
		case '"':
			if err := e.str(); err != nil {
				return err
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth <= 0 {
			if depth < 0 {
				return errors.New("invalid JSON: unbalanced brackets")
			}
			if c == '"' || c == '}' || c == ']' {
				return nil
			}
			// A scalar: it ends before a delimiter.
			next, err := e.br.Peek(1)
			if err != nil || bytes.IndexByte([]byte(",] \t\r\n"), next[0]) >= 0 {
				return nil
			}
		}
		var err error
		if c, err = e.br.ReadByte(); err != nil {
			return unexpectedEOF(err)
		}
	}
}

// str copies the rest of a string, up to and including its closing quote.
func (e *elements) str() error {
	for {
		s, err := e.br.ReadSlice('"')
		e.buf = append(e.buf, s...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return unexpectedEOF(err)
		}
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for i := len(e.buf) - 2; i >= 0 && e.buf[i] == '\\'; i-- {
			n++
		}
		if n%2 == 0 {
			return nil
		}
	}
}

func (e *elements) trailing() error {
	for {
		c, err := e.br.ReadByte()
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			return err
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return errors.New("unexpected content after the end of the JSON document")
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return errors.New("unexpected end of input")
	}
	return err
}

// flatMember is one member of a flat object: its key and its raw value.
type flatMember struct {
	key   []byte // without quotes, escapes not allowed
	value []byte
}

// parseFlat parses an object whose values are all strings, numbers, true,
// false or null, and whose keys have no escapes. ok is false for anything
// else, including invalid JSON, which the caller then decodes the slow
// way for a proper error.
func parseFlat(b []byte, out []flatMember) ([]flatMember, bool) {
	if !utf8.Valid(b) {
		return out, false
	}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return out, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return out, false
		}
		end, escaped := scanString(b, i)
		if end < 0 || escaped {
			return out, false
		}
		key := b[i+1 : end-1]
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return out, false
		}
		i = skipWS(b, i+1)
		vend := scanScalar(b, i)
		if vend < 0 {
			return out, false
		}
		out = append(out, flatMember{key: key, value: b[i:vend]})
		i = skipWS(b, vend)
		if i >= len(b) {
			return out, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return out, skipWS(b, i+1) == len(b)
		default:
			return out, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// scanString returns the index after the string starting at b[i] and
// whether it holds escapes, or -1 when it is not a valid JSON string.
func scanString(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped
		case c < 0x20:
			return -1, false
		case c == '\\':
			escaped = true
			j++
			if j >= len(b) {
				return -1, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return -1, false
				}
				j += 4
			default:
				return -1, false
			}
		}
	}
	return -1, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanScalar returns the index after the string, number or literal at
// b[i], or -1.
func scanScalar(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := scanString(b, i)
		return end
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit)
		}
	}
	return -1
}

// scanNumber follows JSON's number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return -1
		}
	}
	return i
}

// unquote returns a JSON string value's text, or ok false when v is not a
// string.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}
