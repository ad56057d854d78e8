package httpx

import (
	"fmt"
	"strings"
)

// FieldError is one entry of a 422 body, in FastAPI's shape: loc names where
// the bad value was (["query", "radius"], ["body", "geometry"]), msg says
// what is wrong with it and type is a stable machine-readable code.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError collects every FieldError of one request; the HTTP edge
// turns it into a 422 with {"detail": [...]}.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = locString(f.Loc) + ": " + f.Msg
	}
	return "validation failed: " + strings.Join(parts, "; ")
}

// Add records one failure.
func (e *ValidationError) Add(msg, typ string, loc ...any) {
	e.Fields = append(e.Fields, FieldError{Loc: loc, Msg: msg, Type: typ})
}

// Err returns e when it holds failures, nil otherwise, so callers can
// collect every problem and return once.
func (e *ValidationError) Err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// Invalid returns a ValidationError with a single failure.
func Invalid(msg, typ string, loc ...any) *ValidationError {
	v := &ValidationError{}
	v.Add(msg, typ, loc...)
	return v
}

func locString(loc []any) string {
	var b strings.Builder
	for i, l := range loc {
		if i > 0 {
			b.WriteByte('.')
		}
		switch v := l.(type) {
		case string:
			b.WriteString(v)
		default:
			b.WriteString(fmt.Sprint(v))
		}
	}
	return b.String()
}
