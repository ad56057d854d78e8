package cql2

import (
	"fmt"

	"github.com/geogate/geogate/internal/apperr"
)

// Error is a filter the client must fix: one that does not parse, is over
// a limit, names a property the queryables do not have, or mixes types.
// Its message is safe to show the client and says where the problem is.
// It unwraps to an apperr.Invalid error, so code that only knows apperr
// still sees a client error; an OGC API answers it with a 400.
type Error struct {
	// Pos is the 1-based character (not byte) of cql2-text where the
	// problem is, or of cql2-json when the JSON itself does not parse;
	// 0 when it is not known.
	Pos int
	// Path is the JSONPath of the cql2-json member at fault, such as
	// $.args[1].op; empty for cql2-text.
	Path string
	// Msg says what is wrong, without the where.
	Msg string
	// Property is the name a filter used that the queryables do not
	// know, when that is the problem: the caller can point the client to
	// the collection's queryables.
	Property string
}

func (e *Error) Error() string {
	switch {
	case e.Path != "":
		return "at " + e.Path + ": " + e.Msg
	case e.Pos > 0:
		return fmt.Sprintf("at character %d: %s", e.Pos, e.Msg)
	}
	return e.Msg
}

// Unwrap makes every *Error an apperr.Invalid error with the same message.
func (e *Error) Unwrap() error { return apperr.New(apperr.Invalid, e.Error()) }

// loc is where a node of a filter was written: a character of cql2-text,
// or the JSONPath of a cql2-json member.
type loc struct {
	pos  int
	path string
}

func errAt(l loc, format string, args ...any) *Error {
	return &Error{Pos: l.pos, Path: l.path, Msg: fmt.Sprintf(format, args...)}
}
