// Package apperr is geogate's error vocabulary: a small set of kinds that
// domain packages attach to their errors, and that the HTTP edge maps to
// statuses. Domain packages never pick HTTP statuses themselves.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

const (
	// Internal is anything unexpected; its message never reaches a client.
	Internal Kind = iota
	NotFound
	Invalid
	Unauthenticated
	Forbidden
	Conflict
	TooLarge
	RateLimited
	Unavailable
	Timeout
	// BadRequest is a request the standard a route follows answers with
	// 400 rather than 422 (OGC API's query parameters and filters).
	BadRequest
	// Reduced is a request turned away, within its own limits, because
	// the service cannot do everyone's work just now and this caller asks
	// for more of it than the others.
	Reduced
	// Failed is a request the service cannot serve and will not serve on
	// a retry either: the stored data or the service's own settings are
	// at fault, not the request and not a dependency's availability. Its
	// message reaches the client, so it must name no SQL or driver text.
	Failed
	// Gone is a request for what is no longer kept, such as a cursor
	// older than the retention; its message says where to go on from.
	Gone
	// Changed is a conditional write whose condition no longer holds:
	// what it was made against has changed since (a stale If-Match).
	Changed
	// NotAllowed is a method the resource does not take.
	NotAllowed
)

// Error is an error with a kind and a message that is safe to show a client.
type Error struct {
	Kind    Kind
	Message string
	Err     error // the cause, for logs only
	// Limits names, for a RateLimited or Reduced error, the limits that
	// refused the request.
	Limits []string
	// RetryAfter, when positive, is how long the caller should wait
	// before trying again.
	RetryAfter time.Duration
	// Header holds fields the answer carries besides the body: the
	// RateLimit fields of a refusal, say. A decision that refuses a
	// request (the gate, the limiter) sets them, and the HTTP edge
	// writes them; nothing else reads them.
	Header http.Header
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an error of kind k with a client-safe message.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Message: msg} }

// Errorf is New with formatting.
func Errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of kind k with a client-safe message and a cause
// that only logs see.
func Wrap(k Kind, msg string, cause error) *Error {
	return &Error{Kind: k, Message: msg, Err: cause}
}

// Limited returns a RateLimited error refused by the named limits.
func Limited(msg string, limits ...string) *Error {
	return &Error{Kind: RateLimited, Message: msg, Limits: limits}
}

// ReducedCapacity returns a Reduced error: the request was turned away by
// the named limits of a service short of capacity, and may be tried again
// after retryAfter.
func ReducedCapacity(msg string, retryAfter time.Duration, limits ...string) *Error {
	return &Error{Kind: Reduced, Message: msg, Limits: limits, RetryAfter: retryAfter}
}

// KindOf reports the kind of the first *Error in err's chain, or Internal.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// MessageOf reports the client-safe message of the first *Error in err's
// chain, or "" when there is none.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return ""
}
