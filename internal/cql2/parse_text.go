package cql2

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseText parses a cql2-text filter. Keywords are case-insensitive;
// property names are matched as written, in double quotes when they are a
// keyword. The error, an *Error, gives the character where the filter
// stops making sense.
func ParseText(src string, lim Limits) (Expr, error) {
	lim = lim.orDefault()
	if len(src) > lim.MaxBytes {
		return nil, &Error{Msg: fmt.Sprintf("the filter is longer than %d bytes", lim.MaxBytes)}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Pos: invalidUTF8At(src), Msg: "the filter is not valid UTF-8"}
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	if toks[0].kind == tEOF {
		return nil, &Error{Msg: "the filter is empty"}
	}
	p := &textParser{toks: toks, maxOpen: lim.MaxDepth}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf(t, "unexpected %s after a complete expression", describe(t))
	}
	if err := checkLimits(e, lim); err != nil {
		return nil, err
	}
	return e, nil
}

func invalidUTF8At(s string) int {
	n := 1
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return n
			}
		}
		n++
	}
	return n
}

// textParser is a recursive descent over the CQL2 grammar: OR over AND
// over NOT over a predicate or a parenthesised expression.
type textParser struct {
	toks    []token
	i       int
	open    int // parentheses and NOTs open now
	maxOpen int
}

func (p *textParser) peek() token { return p.toks[p.i] }

func (p *textParser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *textParser) errf(t token, format string, args ...any) *Error {
	return errAt(loc{pos: t.pos}, format, args...)
}

// keyword says t is the keyword kw, in any case.
func keyword(t token, kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

// reserved are the words that cannot be a property name unless quoted.
var reserved = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "LIKE": true, "BETWEEN": true,
	"IN": true, "IS": true, "NULL": true, "TRUE": true, "FALSE": true,
}

func (p *textParser) expect(kind tokKind, what string) (token, error) {
	t := p.next()
	if t.kind != kind {
		return t, p.errf(t, "expected %s, found %s", what, describe(t))
	}
	return t, nil
}

func (p *textParser) enter(t token) error {
	p.open++
	if p.open > p.maxOpen {
		return p.errf(t, "the filter nests more than %d levels deep", p.maxOpen)
	}
	return nil
}

func (p *textParser) or() (Expr, error) {
	return p.chain("OR", p.and)
}

func (p *textParser) and() (Expr, error) {
	return p.chain("AND", p.not)
}

// chain reads one or more operands of sub joined by the keyword kw into
// one AND or OR.
func (p *textParser) chain(kw string, sub func() (Expr, error)) (Expr, error) {
	first, err := sub()
	if err != nil {
		return nil, err
	}
	if !keyword(p.peek(), kw) {
		return first, nil
	}
	l := &logical{and: kw == "AND", args: []Expr{first}, at: first.where()}
	for keyword(p.peek(), kw) {
		p.next()
		e, err := sub()
		if err != nil {
			return nil, err
		}
		l.args = append(l.args, e)
	}
	return l, nil
}

func (p *textParser) not() (Expr, error) {
	t := p.peek()
	if !keyword(t, "NOT") {
		return p.primary()
	}
	p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	arg, err := p.not()
	if err != nil {
		return nil, err
	}
	p.open--
	return &not{arg: arg, at: loc{pos: t.pos}}, nil
}

func (p *textParser) primary() (Expr, error) {
	t := p.peek()
	if t.kind == tLParen {
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, "')' or AND or OR"); err != nil {
			return nil, err
		}
		p.open--
		return e, nil
	}
	if t.kind == tIdent && p.toks[p.i+1].kind == tLParen {
		if fn := strings.ToUpper(t.text); spatialFunctions[fn] != "" {
			return p.spatial(fn)
		}
	}
	v, err := p.operand()
	if err != nil {
		return nil, err
	}
	return p.predicate(v)
}

func (p *textParser) spatial(fn string) (Expr, error) {
	t := p.next()
	p.next() // (
	a, err := p.operand()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tComma, "','"); err != nil {
		return nil, err
	}
	b, err := p.operand()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tRParen, "')'"); err != nil {
		return nil, err
	}
	return &spatial{fn: fn, a: a, b: b, at: loc{pos: t.pos}}, nil
}

// predicate reads what follows the first operand v of a predicate.
func (p *textParser) predicate(v operand) (Expr, error) {
	t := p.peek()
	at := loc{pos: t.pos}
	known := t.kind == tOp || keyword(t, "NOT") || keyword(t, "LIKE") || keyword(t, "BETWEEN") || keyword(t, "IN") || keyword(t, "IS")
	if !known {
		if b, ok := v.(*boolLit); ok {
			return b, nil
		}
		return nil, p.errf(t, "expected a comparison operator (=, <>, <, >, <=, >=), LIKE, BETWEEN, IN or IS NULL, found %s", describe(t))
	}
	p.next()
	switch {
	case t.kind == tOp:
		b, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &comparison{op: t.text, a: v, b: b, at: at}, nil
	case keyword(t, "NOT"):
		n := p.peek()
		if !keyword(n, "LIKE") && !keyword(n, "BETWEEN") && !keyword(n, "IN") {
			return nil, p.errf(n, "expected LIKE, BETWEEN or IN after NOT, found %s", describe(n))
		}
		e, err := p.predicate(v)
		if err != nil {
			return nil, err
		}
		return &not{arg: e, at: at}, nil
	case keyword(t, "LIKE"):
		return p.like(v, at)
	case keyword(t, "BETWEEN"):
		return p.between(v, at)
	case keyword(t, "IN"):
		return p.in(v, at)
	}
	negated := keyword(p.peek(), "NOT")
	if negated {
		p.next()
	}
	if n := p.next(); !keyword(n, "NULL") {
		return nil, p.errf(n, "expected NULL, found %s", describe(n))
	}
	var e Expr = &isNull{v: v, at: at}
	if negated {
		e = &not{arg: e, at: at}
	}
	return e, nil
}

func (p *textParser) like(v operand, at loc) (Expr, error) {
	t := p.peek()
	pat, err := p.operand()
	if err != nil {
		return nil, err
	}
	s, ok := pat.(*stringLit)
	if !ok {
		return nil, p.errf(t, "LIKE needs a pattern in single quotes, found %s", describe(t))
	}
	if err := checkPattern(s); err != nil {
		return nil, err
	}
	return &like{v: v, pattern: s, at: at}, nil
}

func (p *textParser) between(v operand, at loc) (Expr, error) {
	lo, err := p.operand()
	if err != nil {
		return nil, err
	}
	if t := p.next(); !keyword(t, "AND") {
		return nil, p.errf(t, "expected AND between the bounds of BETWEEN, found %s", describe(t))
	}
	hi, err := p.operand()
	if err != nil {
		return nil, err
	}
	return &between{v: v, lo: lo, hi: hi, at: at}, nil
}

func (p *textParser) in(v operand, at loc) (Expr, error) {
	if _, err := p.expect(tLParen, "'(' and a list of values"); err != nil {
		return nil, err
	}
	n := &inList{v: v, at: at}
	for {
		o, err := p.operand()
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, o)
		t := p.next()
		if t.kind == tRParen {
			return n, nil
		}
		if t.kind != tComma {
			return nil, p.errf(t, "expected ',' or ')' in the IN list, found %s", describe(t))
		}
	}
}

// operand reads a property name or a literal.
func (p *textParser) operand() (operand, error) {
	t := p.next()
	at := loc{pos: t.pos}
	switch t.kind {
	case tString:
		return newString(t.text, at)
	case tNumber:
		return newNumber(t.text, at)
	case tQuoted:
		if t.text == "" {
			return nil, p.errf(t, "a property name cannot be empty")
		}
		return &property{name: t.text, at: at}, nil
	case tIdent:
		return p.identOperand(t)
	case tEOF:
		return nil, p.errf(t, "the filter ends where a property name or a value should be")
	}
	return nil, p.errf(t, "expected a property name or a value, found %s", describe(t))
}

func (p *textParser) identOperand(t token) (operand, error) {
	at := loc{pos: t.pos}
	u := strings.ToUpper(t.text)
	switch {
	case u == "TRUE" || u == "FALSE":
		return &boolLit{v: u == "TRUE", at: at}, nil
	case reserved[u]:
		return nil, p.errf(t, "expected a property name or a value, found %s (a keyword; quote a property of that name: \"%s\")", u, t.text)
	}
	if _, ok := geomKindOf(u); ok && keyword(p.peek(), "EMPTY") {
		return nil, p.errf(t, "empty geometries are not supported")
	}
	if kind, ok := geomKindOf(u); ok && (p.peek().kind == tLParen || keyword(p.peek(), "Z")) {
		g, err := p.geometry(kind, t)
		if err != nil {
			return nil, err
		}
		return &geomLit{g: g, at: at}, nil
	}
	if p.peek().kind != tLParen {
		return &property{name: t.text, at: at}, nil
	}
	switch {
	case u == "DATE" || u == "TIMESTAMP":
		p.next()
		s, err := p.expect(tString, "the "+strings.ToLower(u)+" in single quotes")
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen, "')'"); err != nil {
			return nil, err
		}
		return newTime(s.text, u == "DATE", loc{pos: s.pos})
	case spatialFunctions[u] != "":
		return nil, p.errf(t, "%s is a predicate, not a value", u)
	}
	if msg, ok := unsupported(u); ok {
		return nil, p.errf(t, "%s", msg)
	}
	return nil, p.errf(t, "unknown function %s: this server supports no functions besides the S_ predicates", t.text)
}

// describe names a token for an error message.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the filter"
	case tString:
		return "the character literal " + shorten(quoteString(t.text))
	case tQuoted:
		return "the property " + shorten(`"`+t.text+`"`)
	case tNumber:
		return "the number " + shorten(t.text)
	}
	return shorten("'" + t.text + "'")
}

func shorten(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	r := []rune(s)
	return string(r[:37]) + "..."
}
