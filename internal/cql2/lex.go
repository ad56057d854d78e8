package cql2

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF    tokKind = iota
	tIdent          // a name or a keyword, as written
	tQuoted         // a double-quoted name, without its quotes
	tString         // a character literal, without its quotes
	tNumber         // a number, as written
	tOp             // = <> < > <= >=
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based character
}

// lexer cuts cql2-text into tokens, counting characters rather than bytes
// so that positions match what the client sees.
type lexer struct {
	src  string
	off  int // byte offset
	char int // characters before off
}

func lex(src string) ([]token, error) {
	l := &lexer{src: src}
	var toks []token
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tEOF {
			return toks, nil
		}
	}
}

func (l *lexer) peek() rune {
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	return r
}

func (l *lexer) peekAt(n int) rune {
	off := l.off
	for ; n > 0 && off < len(l.src); n-- {
		_, size := utf8.DecodeRuneInString(l.src[off:])
		off += size
	}
	r, _ := utf8.DecodeRuneInString(l.src[off:])
	return r
}

func (l *lexer) advance() rune {
	r, size := utf8.DecodeRuneInString(l.src[l.off:])
	l.off += size
	l.char++
	return r
}

func (l *lexer) next() (token, error) {
	for l.off < len(l.src) && unicode.IsSpace(l.peek()) {
		l.advance()
	}
	start, pos := l.off, l.char+1
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: pos}, nil
	}
	r := l.peek()
	switch {
	case r == '(' || r == ')' || r == ',':
		l.advance()
		kind := tComma
		switch r {
		case '(':
			kind = tLParen
		case ')':
			kind = tRParen
		}
		return token{kind: kind, text: string(r), pos: pos}, nil
	case r == '=' || r == '<' || r == '>':
		l.advance()
		if n := l.peek(); (r == '<' && (n == '>' || n == '=')) || (r == '>' && n == '=') {
			l.advance()
		}
		return token{kind: tOp, text: l.src[start:l.off], pos: pos}, nil
	case r == '!' && l.peekAt(1) == '=':
		return token{}, &Error{Pos: pos, Msg: "unexpected '!=': not equal is written <>"}
	case r == '\'':
		return l.quoted('\'', tString, pos)
	case r == '"':
		return l.quoted('"', tQuoted, pos)
	case isDigit(r) || (r == '.' && isDigit(l.peekAt(1))) ||
		((r == '+' || r == '-') && (isDigit(l.peekAt(1)) || (l.peekAt(1) == '.' && isDigit(l.peekAt(2))))):
		return l.number(pos)
	case isIdentStart(r):
		for l.off < len(l.src) && isIdentPart(l.peek()) {
			l.advance()
		}
		return token{kind: tIdent, text: l.src[start:l.off], pos: pos}, nil
	}
	return token{}, &Error{Pos: pos, Msg: fmt.Sprintf("unexpected character %q", r)}
}

// quoted reads a character literal or a quoted name. A doubled quote
// stands for one; in a character literal so does a backslash before it, as
// the CQL2 grammar allows. Any other backslash is kept as it is, so that
// LIKE patterns keep their escapes.
func (l *lexer) quoted(q rune, kind tokKind, pos int) (token, error) {
	l.advance()
	var b strings.Builder
	for {
		if l.off >= len(l.src) {
			what := "character literal"
			if kind == tQuoted {
				what = "quoted property name"
			}
			return token{}, &Error{Pos: pos, Msg: "the " + what + " that starts here has no closing " + string(q)}
		}
		r := l.advance()
		switch {
		case r == q && l.peek() == q && l.off < len(l.src):
			l.advance()
			b.WriteRune(q)
		case r == q:
			return token{kind: kind, text: b.String(), pos: pos}, nil
		case r == '\\' && q == '\'' && l.peek() == '\'' && l.off < len(l.src):
			l.advance()
			b.WriteRune(q)
		default:
			b.WriteRune(r)
		}
	}
}

func (l *lexer) number(pos int) (token, error) {
	start := l.off
	if r := l.peek(); r == '+' || r == '-' {
		l.advance()
	}
	l.digits()
	if l.peek() == '.' {
		l.advance()
		l.digits()
	}
	if r := l.peek(); r == 'e' || r == 'E' {
		l.advance()
		if r := l.peek(); r == '+' || r == '-' {
			l.advance()
		}
		if !isDigit(l.peek()) {
			return token{}, &Error{Pos: pos, Msg: "a number's exponent needs digits"}
		}
		l.digits()
	}
	return token{kind: tNumber, text: l.src[start:l.off], pos: pos}, nil
}

func (l *lexer) digits() {
	for l.off < len(l.src) && isDigit(l.peek()) {
		l.advance()
	}
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// isIdentStart and isIdentPart follow the CQL2 grammar's identifier: the
// letters of every script, the colon and the underscore, then also digits,
// dots and combining marks (so eo:cloud_cover and a.b are single names).
func isIdentStart(r rune) bool {
	return r == ':' || r == '_' || unicode.IsLetter(r)
}

func isIdentPart(r rune) bool {
	return isIdentStart(r) || isDigit(r) || r == '.' || unicode.Is(unicode.Mn, r) || r == '\u203f' || r == '\u2040'
}
