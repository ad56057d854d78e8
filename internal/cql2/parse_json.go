package cql2

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseJSON parses a cql2-json filter. Operator names are matched without
// regard to case ("isNull", "s_intersects"); geometry literals are GeoJSON
// geometries or {"bbox": [...]}. The error, an *Error, gives the JSONPath
// of the member at fault, or the character where the JSON itself breaks.
func ParseJSON(src []byte, lim Limits) (Expr, error) {
	lim = lim.orDefault()
	if len(src) > lim.MaxBytes {
		return nil, &Error{Msg: fmt.Sprintf("the filter is longer than %d bytes", lim.MaxBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(src, err)
	}
	end := int(dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		for end < len(src) && strings.IndexByte(" \t\r\n", src[end]) >= 0 {
			end++
		}
		return nil, &Error{Pos: utf8.RuneCount(src[:end]) + 1, Msg: "unexpected data after the JSON value"}
	}
	jp := jsonParser{maxDepth: lim.MaxDepth}
	e, err := jp.boolean(v, "$", 1)
	if err != nil {
		return nil, err
	}
	if err := checkLimits(e, lim); err != nil {
		return nil, err
	}
	return e, nil
}

func jsonError(src []byte, err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		// The decoder stops after the byte it cannot take.
		off := max(0, min(int(syn.Offset), len(src)))
		return &Error{Pos: max(1, utf8.RuneCount(src[:off])), Msg: "the filter is not JSON: " + syn.Error()}
	case errors.Is(err, io.EOF):
		return &Error{Msg: "the filter is empty"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Pos: utf8.RuneCount(src) + 1, Msg: "the JSON ends before it is complete"}
	}
	return &Error{Msg: "the filter is not JSON: " + err.Error()}
}

type jsonParser struct {
	maxDepth int
}

// jsonObject is a decoded JSON object and its path.
type jsonObject struct {
	m    map[string]any
	path string
}

func (o jsonObject) has(key string) bool {
	_, ok := o.m[key]
	return ok
}

func member(path, key string) string  { return path + "." + key }
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// only refuses members other than keys, so that a misspelt one is not
// silently ignored.
func (o jsonObject) only(keys ...string) error {
	for k := range o.m {
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			return errAt(loc{path: member(o.path, k)}, "unexpected member %q", k)
		}
	}
	return nil
}

func (jp *jsonParser) boolean(v any, path string, depth int) (Expr, error) {
	at := loc{path: path}
	if depth > jp.maxDepth {
		return nil, errAt(at, "the filter nests more than %d levels deep", jp.maxDepth)
	}
	switch v := v.(type) {
	case bool:
		return &boolLit{v: v, at: at}, nil
	case map[string]any:
		if _, ok := v["op"]; ok {
			return jp.operation(jsonObject{v, path}, depth)
		}
		if _, ok := v["property"]; ok {
			return nil, errAt(at, "a property is not a boolean expression: compare it, e.g. {\"op\": \"=\", \"args\": [{\"property\": ...}, ...]}")
		}
	}
	return nil, errAt(at, "expected a boolean expression: {\"op\": ..., \"args\": [...]}, true or false; found %s", jsonKind(v))
}

// operation reads {"op": ..., "args": [...]} as a boolean expression.
func (jp *jsonParser) operation(o jsonObject, depth int) (Expr, error) {
	at := loc{path: o.path}
	op, ok := o.m["op"].(string)
	if !ok {
		return nil, errAt(loc{path: member(o.path, "op")}, "op must be a string")
	}
	if err := o.only("op", "args"); err != nil {
		return nil, err
	}
	argsPath := member(o.path, "args")
	args, ok := o.m["args"].([]any)
	if !ok {
		return nil, errAt(loc{path: argsPath}, "args must be an array")
	}
	nargs := func(n int) error {
		if len(args) != n {
			return errAt(loc{path: argsPath}, "%s takes %d arguments, found %d", op, n, len(args))
		}
		return nil
	}
	operands := func(n int) ([]operand, error) {
		if err := nargs(n); err != nil {
			return nil, err
		}
		ops := make([]operand, n)
		for i := range ops {
			var err error
			if ops[i], err = jp.operand(args[i], index(argsPath, i)); err != nil {
				return nil, err
			}
		}
		return ops, nil
	}
	lower := strings.ToLower(op)
	switch lower {
	case "and", "or":
		if len(args) < 2 {
			return nil, errAt(loc{path: argsPath}, "%s takes two or more arguments, found %d", op, len(args))
		}
		l := &logical{and: lower == "and", at: at}
		for i, a := range args {
			e, err := jp.boolean(a, index(argsPath, i), depth+1)
			if err != nil {
				return nil, err
			}
			l.args = append(l.args, e)
		}
		return l, nil
	case "not":
		if err := nargs(1); err != nil {
			return nil, err
		}
		e, err := jp.boolean(args[0], index(argsPath, 0), depth+1)
		if err != nil {
			return nil, err
		}
		return &not{arg: e, at: at}, nil
	case "=", "<>", "<", ">", "<=", ">=":
		ops, err := operands(2)
		if err != nil {
			return nil, err
		}
		return &comparison{op: op, a: ops[0], b: ops[1], at: at}, nil
	case "like":
		ops, err := operands(2)
		if err != nil {
			return nil, err
		}
		s, ok := ops[1].(*stringLit)
		if !ok {
			return nil, errAt(loc{path: index(argsPath, 1)}, "the pattern of like must be a string")
		}
		if err := checkPattern(s); err != nil {
			return nil, err
		}
		return &like{v: ops[0], pattern: s, at: at}, nil
	case "between":
		ops, err := operands(3)
		if err != nil {
			return nil, err
		}
		return &between{v: ops[0], lo: ops[1], hi: ops[2], at: at}, nil
	case "in":
		return jp.in(args, argsPath, at)
	case "isnull":
		ops, err := operands(1)
		if err != nil {
			return nil, err
		}
		return &isNull{v: ops[0], at: at}, nil
	}
	if fn := strings.ToUpper(op); spatialFunctions[fn] != "" {
		ops, err := operands(2)
		if err != nil {
			return nil, err
		}
		return &spatial{fn: fn, a: ops[0], b: ops[1], at: at}, nil
	}
	opAt := loc{path: member(o.path, "op")}
	if msg, ok := unsupported(op); ok {
		return nil, errAt(opAt, "%s", msg)
	}
	if isArithmetic(op) || lower == "casei" || lower == "accenti" {
		return nil, errAt(opAt, "%q is not a boolean expression", op)
	}
	return nil, errAt(opAt, "unknown operator %q", op)
}

func (jp *jsonParser) in(args []any, argsPath string, at loc) (Expr, error) {
	if len(args) != 2 {
		return nil, errAt(loc{path: argsPath}, "in takes 2 arguments, a value and an array, found %d", len(args))
	}
	v, err := jp.operand(args[0], index(argsPath, 0))
	if err != nil {
		return nil, err
	}
	listPath := index(argsPath, 1)
	items, ok := args[1].([]any)
	if !ok || len(items) == 0 {
		return nil, errAt(loc{path: listPath}, "the second argument of in must be an array of one or more values")
	}
	n := &inList{v: v, at: at}
	for i, item := range items {
		o, err := jp.operand(item, index(listPath, i))
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, o)
	}
	return n, nil
}

func isArithmetic(op string) bool {
	switch op {
	case "+", "-", "*", "/", "^", "%", "div":
		return true
	}
	return false
}

// operand reads a property reference or a literal.
func (jp *jsonParser) operand(v any, path string) (operand, error) {
	at := loc{path: path}
	switch v := v.(type) {
	case string:
		return newString(v, at)
	case json.Number:
		return newNumber(string(v), at)
	case bool:
		return &boolLit{v: v, at: at}, nil
	case map[string]any:
		return jp.objectOperand(jsonObject{v, path})
	case nil:
		return nil, errAt(at, "null is not a CQL2 value: test for a missing value with isNull")
	case []any:
		return nil, errAt(at, "arrays are not supported here (array functions are not supported)")
	}
	return nil, errAt(at, "expected a value, found %s", jsonKind(v))
}

func (jp *jsonParser) objectOperand(o jsonObject) (operand, error) {
	at := loc{path: o.path}
	one := func(key string) (string, error) {
		if err := o.only(key); err != nil {
			return "", err
		}
		s, ok := o.m[key].(string)
		if !ok {
			return "", errAt(loc{path: member(o.path, key)}, "%s must be a string", key)
		}
		return s, nil
	}
	switch {
	case o.has("property"):
		name, err := one("property")
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, errAt(loc{path: member(o.path, "property")}, "a property name cannot be empty")
		}
		return &property{name: name, at: at}, nil
	case o.has("timestamp") || o.has("date"):
		key := "timestamp"
		if o.has("date") {
			key = "date"
		}
		s, err := one(key)
		if err != nil {
			return nil, err
		}
		return newTime(s, key == "date", loc{path: member(o.path, key)})
	case o.has("type"): // before bbox: a GeoJSON geometry may have a bbox
		g, err := jp.geoJSON(o, true)
		if err != nil {
			return nil, err
		}
		return &geomLit{g: g, at: at}, nil
	case o.has("bbox"):
		return jp.bbox(o)
	case o.has("interval"):
		msg, _ := unsupported("INTERVAL")
		return nil, errAt(at, "%s", msg)
	case o.has("op"):
		op, _ := o.m["op"].(string)
		if msg, ok := unsupported(op); ok {
			return nil, errAt(loc{path: member(o.path, "op")}, "%s", msg)
		}
		if isArithmetic(op) {
			return nil, errAt(loc{path: member(o.path, "op")}, "arithmetic is not supported")
		}
		return nil, errAt(at, "expected a value or a property, found the operation %q", op)
	}
	return nil, errAt(at, `expected a value: a string, a number, a boolean, {"property": ...}, {"timestamp": ...}, {"date": ...}, a GeoJSON geometry or {"bbox": [...]}`)
}

func (jp *jsonParser) bbox(o jsonObject) (operand, error) {
	if err := o.only("bbox"); err != nil {
		return nil, err
	}
	path := member(o.path, "bbox")
	items, ok := o.m["bbox"].([]any)
	if !ok {
		return nil, errAt(loc{path: path}, "bbox must be an array of four or six numbers")
	}
	c, err := numbers(items, path)
	if err != nil {
		return nil, err
	}
	g, err := newBBox(c, loc{path: path})
	if err != nil {
		return nil, err
	}
	return &geomLit{g: g, at: loc{path: o.path}}, nil
}

func numbers(items []any, path string) ([]float64, error) {
	c := make([]float64, len(items))
	for i, item := range items {
		n, ok := item.(json.Number)
		if !ok {
			return nil, errAt(loc{path: index(path, i)}, "expected a number, found %s", jsonKind(item))
		}
		lit, err := newNumber(string(n), loc{path: index(path, i)})
		if err != nil {
			return nil, err
		}
		c[i] = lit.f
	}
	return c, nil
}

// jsonKind names the JSON type of v for an error message.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "the string " + shorten(strconv.Quote(v))
	case json.Number:
		return "the number " + shorten(string(v))
	case []any:
		return "an array"
	}
	return "an object"
}
