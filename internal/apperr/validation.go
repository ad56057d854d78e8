package apperr

import (
	"fmt"
	"strings"
)

// FieldError is one problem with a request's input, in FastAPI's shape: loc
// names where the bad value was (["query", "radius"], ["body", "geometry"]),
// msg says what is wrong with it and type is a stable machine-readable code.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError collects every FieldError of one request; the HTTP edge
// answers it with a 422 whose detail is the list.
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

// Add records one problem.
func (e *ValidationError) Add(msg, typ string, loc ...any) {
	e.Fields = append(e.Fields, FieldError{Loc: loc, Msg: msg, Type: typ})
}

// Err returns e when it holds problems and nil otherwise, so that callers
// can collect every problem of a request and return once.
func (e *ValidationError) Err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// InvalidField returns a ValidationError with a single problem.
func InvalidField(msg, typ string, loc ...any) *ValidationError {
	v := &ValidationError{}
	v.Add(msg, typ, loc...)
	return v
}

func locString(loc []any) string {
	parts := make([]string, len(loc))
	for i, l := range loc {
		parts[i] = fmt.Sprint(l)
	}
	return strings.Join(parts, ".")
}
