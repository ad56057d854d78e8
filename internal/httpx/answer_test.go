package httpx

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestAnswer: a small answer goes out whole, with its length and the
// headers its Header func sets last; a large one goes out as it is
// written, headers first; an error before anything was sent is answered
// as an error, and one after cuts the answer off, so that the client
// never takes a part for the whole.
func TestAnswer(t *testing.T) {
	r := NewRouter(newTestLogger(io.Discard), nil, TrustedProxies{})
	piece := strings.Repeat("x", 1000)
	write := func(c *gin.Context, pieces int, fail error) {
		w := NewAnswer(c, "application/geo+json")
		set := "unset"
		w.Header = func() { c.Header("X-Settled", set) }
		for range pieces {
			w.WriteString(piece)
			w.Write([]byte(piece))
			w.WriteByte('.')
		}
		set = "settled"
		if fail != nil {
			w.Fail(fail)
			return
		}
		w.Finish()
	}
	r.GET("/small", func(c *gin.Context) { write(c, 2, nil) })
	r.GET("/large", func(c *gin.Context) { write(c, 500, nil) })
	r.GET("/early", func(c *gin.Context) { write(c, 2, errors.New("statement failed")) })
	r.GET("/late", func(c *gin.Context) { write(c, 500, errors.New("statement failed")) })
	srv := httptest.NewServer(r)
	defer srv.Close()

	for _, tc := range []struct {
		path    string
		status  int
		length  int64 // -1: none, the answer went out as written
		settled string
		bytes   int
		cut     bool
	}{
		{"/small", 200, 2 * 2001, "settled", 2 * 2001, false},
		{"/large", 200, -1, "unset", 500 * 2001, false},
		{"/early", 500, -2, "", 0, false},
		{"/late", 200, -1, "unset", 0, true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, readErr := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.length != -2 && resp.ContentLength != tc.length {
				t.Errorf("Content-Length = %d, want %d", resp.ContentLength, tc.length)
			}
			if got := resp.Header.Get("X-Settled"); got != tc.settled {
				t.Errorf("X-Settled = %q, want %q", got, tc.settled)
			}
			if tc.cut {
				if readErr == nil {
					t.Errorf("the answer cut off read whole (%d bytes), want an error", len(body))
				}
				return
			}
			if readErr != nil {
				t.Fatalf("reading the answer: %v", readErr)
			}
			if tc.status == 200 && len(body) != tc.bytes {
				t.Errorf("%d bytes, want %d", len(body), tc.bytes)
			}
			if tc.status != 200 && !strings.Contains(string(body), `"detail"`) {
				t.Errorf("error body %q, want a detail", body)
			}
		})
	}
}
