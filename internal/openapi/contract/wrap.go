package contract

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/geogate/geogate/internal/openapi"
)

// Wrap returns h with every exchange checked against the document with
// limits l, for tests that serve a package's routes without the whole
// service (httptest.NewServer(contract.Wrap(t, router, limits))). When the
// test ends, every violation fails it.
func Wrap(t testing.TB, h http.Handler, l openapi.Limits) http.Handler {
	t.Helper()
	data, err := openapi.JSON(l)
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	c, err := NewFor(context.Background(), data)
	if err != nil {
		t.Fatalf("contract: %v", err)
	}
	rec := NewRecorder(c)
	t.Cleanup(func() {
		for _, v := range rec.Violations() {
			t.Errorf("contract violation: %s", v)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "contract: reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		seen := r.Clone(context.WithoutCancel(r.Context()))
		cw := &captureWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		if errors.Is(r.Context().Err(), context.Canceled) {
			return // the client went away: nobody received the answer
		}
		if cw.status == 0 {
			cw.status = http.StatusOK
			cw.header = w.Header().Clone()
		}
		if seen.URL.Host == "" {
			seen.URL.Scheme, seen.URL.Host = "http", r.Host
		}
		rec.Record(context.Background(), Exchange{Request: seen, RequestBody: reqBody, Status: cw.status, Header: cw.header, Body: cw.body.Bytes()})
	})
}

// captureWriter keeps a copy of what a handler writes.
type captureWriter struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.header = w.ResponseWriter.Header().Clone()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
