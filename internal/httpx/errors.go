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
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
)

// Detail is the error body of every non-2xx response: FastAPI's shape.
type Detail struct {
	Detail any `json:"detail"`
}

// Problem is the body of a 429: an RFC 9457 problem document whose detail
// also gives it FastAPI's {"detail": ...} shape.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// quotaExceeded is the problem type of a 429 (RFC 9457's registry).
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

var kindStatus = map[apperr.Kind]int{
	apperr.Internal:        http.StatusInternalServerError,
	apperr.NotFound:        http.StatusNotFound,
	apperr.Unauthenticated: http.StatusUnauthorized,
	apperr.Forbidden:       http.StatusForbidden,
	apperr.Conflict:        http.StatusConflict,
	apperr.TooLarge:        http.StatusRequestEntityTooLarge,
	apperr.RateLimited:     http.StatusTooManyRequests,
	apperr.Unavailable:     http.StatusServiceUnavailable,
	apperr.Timeout:         http.StatusGatewayTimeout,
	apperr.BadRequest:      http.StatusBadRequest,
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
		return 499, "Client closed request."
	}
	return http.StatusInternalServerError, "Internal server error."
}

// Abort ends the request with the response err maps to. Only 5xx errors are
// logged, with their cause; 4xx are the client's business. A RateLimited
// error is answered with a problem document naming the limits that refused
// the request.
func Abort(c *gin.Context, err error) {
	status, detail := Status(err)
	if status >= 500 {
		Logger(c).Error("request failed", "status", status, "err", err.Error())
	}
	_ = c.Error(err)
	var ae *apperr.Error
	if status == http.StatusTooManyRequests && errors.As(err, &ae) {
		body, _ := json.Marshal(Problem{Type: quotaExceeded, Title: "Too Many Requests", Status: status,
			Detail: ae.Message, ViolatedPolicies: ae.Limits})
		c.Abort()
		c.Data(status, "application/problem+json", body)
		return
	}
	c.AbortWithStatusJSON(status, Detail{Detail: detail})
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
