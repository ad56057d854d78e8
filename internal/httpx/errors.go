// Package httpx holds what every geogate route shares at the HTTP edge: the
// one place that maps errors to statuses and {"detail": ...} bodies, the
// request middleware (ids, client addresses, logs, metrics, panics) and the
// router defaults.
package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
)

// Detail is the error body of every non-2xx response: FastAPI's shape.
type Detail struct {
	Detail any `json:"detail"`
}

// Problem is the body of a 429, and of a 503 turning a caller away for
// lack of capacity: an RFC 9457 problem document whose detail also gives
// it FastAPI's {"detail": ...} shape.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// The problem types of the RateLimit header draft
// (draft-ietf-httpapi-ratelimit-headers): a 429, and a 503 that turns a
// caller within its quota away because the service is short of capacity.
const (
	quotaExceeded            = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	temporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

var kindStatus = map[apperr.Kind]int{
	apperr.Internal:        http.StatusInternalServerError,
	apperr.NotFound:        http.StatusNotFound,
	apperr.Unauthenticated: http.StatusUnauthorized,
	apperr.Forbidden:       http.StatusForbidden,
	apperr.Conflict:        http.StatusConflict,
	apperr.TooLarge:        http.StatusRequestEntityTooLarge,
	apperr.RateLimited:     http.StatusTooManyRequests,
	apperr.Unavailable:     http.StatusServiceUnavailable,
	apperr.Reduced:         http.StatusServiceUnavailable,
	apperr.Timeout:         http.StatusGatewayTimeout,
	apperr.BadRequest:      http.StatusBadRequest,
	apperr.Failed:          http.StatusInternalServerError,
	apperr.Gone:            http.StatusGone,
	apperr.Changed:         http.StatusPreconditionFailed,
	apperr.NotAllowed:      http.StatusMethodNotAllowed,
}

// ClientClosed is the status of a request whose client left before its
// answer (nginx's 499): never a server error, whatever the work it cut
// short returned.
const ClientClosed = 499

// gone says whether the client of c has left: its request's context was
// cancelled, not timed out.
func gone(c *gin.Context) bool {
	return errors.Is(c.Request.Context().Err(), context.Canceled)
}

// Status returns the HTTP status for err and the detail safe to show.
// Anything it does not recognise is a 500 with a generic detail: driver and
// SQL text never reach a client.
func Status(err error) (int, any) {
	var v *apperr.ValidationError
	if errors.As(err, &v) {
		return http.StatusUnprocessableEntity, v.Fields
	}
	k := apperr.KindOf(err)
	if k == apperr.Invalid {
		// Every 422 carries FastAPI's list of problems, even one that
		// names no parameter.
		return http.StatusUnprocessableEntity, []apperr.FieldError{{Loc: []any{}, Msg: apperr.MessageOf(err), Type: "value_error"}}
	}
	if k != apperr.Internal {
		return kindStatus[k], apperr.MessageOf(err)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "The request took too long and was cancelled."
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads this body.
		return ClientClosed, "Client closed request."
	}
	return http.StatusInternalServerError, "Internal server error."
}

// Abort ends the request with the response err maps to. Only 5xx errors are
// logged, with their cause; 4xx are the client's business. A RateLimited
// error is answered with a problem document naming the limits that refused
// the request, and so is a Reduced one (a 503 with Retry-After); a Reduced
// error is a decision, not a failure, and is not logged as one.
func Abort(c *gin.Context, err error) {
	status, detail := Status(err)
	var ae *apperr.Error
	errors.As(err, &ae)
	reduced := ae != nil && ae.Kind == apperr.Reduced
	if gone(c) {
		// The client left, so whatever failed failed for that reason:
		// PostgreSQL says "canceling statement due to user request", a
		// render says its context ended. Nobody reads the answer, and
		// nothing went wrong here.
		status, detail, ae, reduced = ClientClosed, "Client closed request.", nil, false
		Logger(c).Info("client closed request", "status", status, "err", err.Error())
	}
	if status >= 500 && !reduced {
		Logger(c).Error("request failed", "status", status, "err", err.Error())
	}
	_ = c.Error(err)
	if ae != nil {
		SetHeader(c, ae.Header)
	}
	if ae != nil && ae.RetryAfter > 0 {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(ae.RetryAfter.Seconds())), 10))
	}
	switch {
	case status == http.StatusTooManyRequests && ae != nil:
		abortProblem(c, Problem{Type: quotaExceeded, Title: "Too Many Requests", Status: status,
			Detail: ae.Message, ViolatedPolicies: ae.Limits})
	case reduced:
		abortProblem(c, Problem{Type: temporaryReducedCapacity, Title: "Service Unavailable", Status: status,
			Detail: ae.Message, ViolatedPolicies: ae.Limits})
	default:
		c.AbortWithStatusJSON(status, Detail{Detail: detail})
	}
}

func abortProblem(c *gin.Context, p Problem) {
	body, _ := json.Marshal(p)
	c.Abort()
	c.Data(p.Status, "application/problem+json", body)
}

// SetHeader adds the fields of h to the answer of c, replacing those of
// the same names: the RateLimit fields of an admitted request, say.
func SetHeader(c *gin.Context, h http.Header) {
	dst := c.Writer.Header()
	for k, v := range h {
		dst[k] = v
	}
}

// Admitted ends the request with err when its gate refused it, or puts
// the RateLimit fields of its pass on the answer; it says whether the
// handler goes on.
func Admitted(c *gin.Context, pass interface{ Header() http.Header }, err error) bool {
	if err != nil {
		Abort(c, err)
		return false
	}
	SetHeader(c, pass.Header())
	return true
}

// AbortStatus ends the request with status and a plain detail message.
func AbortStatus(c *gin.Context, status int, msg string) {
	c.AbortWithStatusJSON(status, Detail{Detail: msg})
}

// AddLogAttrs adds attributes to the request-scoped logger, so that the
// access log and every later log line of the request carry them.
func AddLogAttrs(c *gin.Context, args ...any) {
	if v, ok := c.Get(loggerKey); ok {
		if r, ok := v.(*requestLogger); ok {
			c.Set(loggerKey, r.with(args))
			return
		}
	}
	c.Set(loggerKey, &requestLogger{base: slog.Default(), attrs: args})
}

// Logger returns the request-scoped logger set by the middleware, or the
// default logger outside a request.
func Logger(c *gin.Context) *slog.Logger {
	if l, ok := c.Get(loggerKey); ok {
		if r, ok := l.(*requestLogger); ok {
			return r.logger()
		}
	}
	return slog.Default()
}

// LogEnabled reports whether Logger(c) writes at level, without making a
// request's logger to ask.
func LogEnabled(c *gin.Context, level slog.Level) bool {
	if l, ok := c.Get(loggerKey); ok {
		if r, ok := l.(*requestLogger); ok {
			return r.enabled(c, level)
		}
	}
	return slog.Default().Enabled(c.Request.Context(), level)
}
