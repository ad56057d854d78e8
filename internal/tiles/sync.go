package tiles

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
)

// SyncVersions is middleware for routes that write layer tables (geofence
// create, update, delete). After the handler has committed and before the
// first byte of a successful answer leaves, it publishes the new versions
// to Redis and waits the version window out (Versions.Commit), so that
// once the client has the answer, no replica serves a tile rendered before
// the write.
func (h *Handler) SyncVersions() gin.HandlerFunc {
	return syncMiddleware(h.versions.Commit, h.o.Log)
}

func syncMiddleware(syncFn func(context.Context) error, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			c.Next()
			return
		}
		w := &syncWriter{ResponseWriter: c.Writer, ctx: c.Request.Context(), syncFn: syncFn, log: log}
		c.Writer = w
		c.Next()
		// Bodiless answers (204) are written after the chain returns.
		w.sync()
	}
}

// syncWriter runs syncFn before the first write of a successful answer.
type syncWriter struct {
	gin.ResponseWriter
	ctx    context.Context
	syncFn func(context.Context) error
	log    *slog.Logger
	once   sync.Once
}

func (w *syncWriter) sync() {
	w.once.Do(func() {
		if w.ResponseWriter.Status() >= 400 {
			return
		}
		if err := w.syncFn(w.ctx); err != nil {
			w.log.Warn("tile versions not published after a write", "err", err.Error())
		}
	})
}

func (w *syncWriter) WriteHeaderNow() {
	w.sync()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.sync()
	return w.ResponseWriter.Write(b)
}

func (w *syncWriter) WriteString(s string) (int, error) {
	w.sync()
	return w.ResponseWriter.WriteString(s)
}

func (w *syncWriter) Flush() {
	w.sync()
	w.ResponseWriter.Flush()
}
