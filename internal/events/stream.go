package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/outbox"
)

// StreamTiming paces a live stream.
type StreamTiming struct {
	// Heartbeat is how often an idle stream sends a comment, so that
	// proxies keep it open and a client learns it is alive.
	Heartbeat time.Duration
	// Poll is how often a stream reads the outbox unwoken: the fallback
	// for a notification lost while the listener reconnects.
	Poll time.Duration
}

func (t StreamTiming) orDefaults() StreamTiming {
	if t.Heartbeat <= 0 {
		t.Heartbeat = 15 * time.Second
	}
	if t.Poll <= 0 {
		t.Poll = 5 * time.Second
	}
	return t
}

// Stream serves GET /events/stream?subscription=ID: the subscription's
// events as server-sent events, those after the cursor first and then
// each as it commits. The cursor is the Last-Event-ID header a
// reconnecting EventSource sends, else the after parameter, else the
// beginning. The gate admits the stream once, at connect.
func (h *Handler) Stream(c *gin.Context) {
	q := httpx.Query(c)
	after, err := streamCursor(c.GetHeader("Last-Event-ID"), q.Get("after"))
	if err == nil && q.Get("subscription") == "" {
		err = errNoSubscriptionParam
	}
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	closeStream, err := h.hub.open(auth.FromContext(c.Request.Context()).LimitKey(), h.rules.MaxStreams)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	defer closeStream()
	owner, sub, pass, ok := h.subscription(c, q.Get("subscription"))
	if !ok {
		return
	}
	// A cursor older than what is kept is answered before the stream
	// begins, as GET /events answers it.
	if _, _, err := h.svc.Events(c.Request.Context(), owner, sub.ID, after, 0); err != nil {
		pass.Done()
		httpx.Abort(c, err)
		return
	}
	// The connect is one request; each read of the outbox after it is
	// admitted and charged on its own (stream.read), so a stream holds
	// no in-flight slot while it lasts.
	pass.Done()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-store")
	c.Header("X-Accel-Buffering", "no") // nginx: pass each event on at once
	c.Status(http.StatusOK)
	c.Writer.WriteHeaderNow()
	if c.Request.Method == http.MethodHead {
		return
	}
	s := &stream{h: h, w: c.Writer, rc: http.NewResponseController(c.Writer), log: httpx.Logger(c),
		owner: owner, sub: sub.ID, after: after, t: h.rules.Stream.orDefaults()}
	s.run(c.Request.Context())
}

// streamCursor reads where a stream begins: Last-Event-ID wins over after.
func streamCursor(lastID, after string) (int64, error) {
	raw, loc := after, []any{"query", "after"}
	if lastID != "" {
		raw, loc = lastID, []any{"header", "Last-Event-ID"}
	}
	if raw == "" {
		return -1, nil // the oldest event kept
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, apperr.InvalidField("Must be an event's id (its sequence number), or omitted.", "value_error", loc...)
	}
	return n, nil
}

// stream is one client's live stream.
type stream struct {
	h     *Handler
	w     gin.ResponseWriter
	rc    *http.ResponseController
	log   *slog.Logger
	owner string
	sub   string
	after int64
	t     StreamTiming
	// until, after a read the gate refused, is when the next may be
	// asked for: wakes before it read nothing.
	until time.Time
}

// run sends events until the client goes away, the service shuts down,
// the subscription is deleted or the outbox cannot be read; a client
// reconnects with Last-Event-ID and misses nothing.
func (s *stream) run(ctx context.Context) {
	// The server's timeouts bound a request, and a stream is meant to
	// outlive them: no read deadline (the request has been read; a read
	// timing out would cancel the stream's context), and a write deadline
	// renewed on each write, which only a client that stops reading hits.
	_ = s.rc.SetReadDeadline(time.Time{})
	wake, unfollow := s.h.hub.follow(s.sub)
	defer unfollow()
	poll := time.NewTicker(s.t.Poll)
	defer poll.Stop()
	beat := time.NewTicker(s.t.Heartbeat)
	defer beat.Stop()
	if !s.send(": stream of " + s.sub + "\nretry: 2000\n\n") {
		return
	}
	for {
		if !s.catchUp(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.h.hub.Stopped():
			return
		case <-wake:
		case <-poll.C:
		case <-beat.C:
			if !s.send(": heartbeat\n\n") {
				return
			}
		}
	}
}

// catchUp sends every event after the cursor; false ends the stream.
func (s *stream) catchUp(ctx context.Context) bool {
	for {
		more, ok := s.read(ctx)
		if !ok || !more {
			return ok
		}
	}
}

// read sends one page of the events after the cursor, as a request of
// its own: the gate admits it and charges what it read and sent, under
// the route's policies. more says a full page was sent: there may be
// more behind it. A read the gate refuses waits out its Retry-After, the
// stream kept open; ok false ends the stream.
func (s *stream) read(ctx context.Context) (more, ok bool) {
	if time.Now().Before(s.until) {
		return false, true
	}
	pass, err := s.h.gate.Admit(ctx, gate.Ask{})
	if err != nil {
		var refused *apperr.Error
		if !errors.As(err, &refused) || refused.Kind != apperr.RateLimited {
			return false, ctx.Err() == nil && apperr.KindOf(err) == apperr.Unavailable
		}
		s.until = time.Now().Add(max(time.Second, refused.RetryAfter))
		return false, true
	}
	defer pass.Done()
	evs, _, err := s.h.svc.Events(ctx, s.owner, s.sub, s.after, s.h.svc.s.MaxPage)
	if err != nil {
		// A subscription deleted, or a cursor that fell behind retention
		// (the client's reconnect is told so), ends the stream quietly.
		if k := apperr.KindOf(err); ctx.Err() == nil && k != apperr.NotFound && k != apperr.Gone {
			s.log.Warn("event stream ended", "subscription", s.sub, "err", err.Error())
		}
		return false, false
	}
	bytes := 0
	for _, e := range evs {
		f := frame(e)
		if !s.send(f) {
			return false, false
		}
		bytes += len(f)
		s.after = e.Seq
	}
	pass.Spent(gate.Usage{Bytes: bytes})
	return len(evs) == s.h.svc.s.MaxPage, true
}

// frame is e as one server-sent event.
func frame(e outbox.Event) string {
	data, _ := json.Marshal(e.CloudEvent()) // plain values: never fails
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, data)
}

// send writes and flushes text; false when the client is gone.
func (s *stream) send(text string) bool {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.t.Heartbeat + 15*time.Second))
	if _, err := s.w.WriteString(text); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}
