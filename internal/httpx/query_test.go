package httpx

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		want   url.Values
		detail string // a part of the 400's detail; "" for no error
	}{
		{"OK", "sortby=name&limit=2", url.Values{"sortby": {"name"}, "limit": {"2"}}, ""},
		{"Empty", "", url.Values{}, ""},
		{"EscapedSemicolon", "q=a%3Bb", url.Values{"q": {"a;b"}}, ""},
		{"ErrSemicolonInValue", "sortby=name;drop", nil, `The query parameter "sortby=name;drop" contains a ';'`},
		{"ErrSemicolonSeparator", "a=1;b=2&c=3", nil, `"a=1;b=2"`},
		{"ErrSemicolonAfterGoodPair", "limit=2&sortby=name;drop", nil, `"sortby=name;drop"`},
		{"ErrBadEscapeInValue", "q=%zz", nil, `The query parameter "q=%zz" has an invalid %-escape`},
		{"ErrBadEscapeInKey", "%4=1", nil, `"%4=1"`},
		{"ErrLongPairShortened", "q=" + strings.Repeat("x", 100) + ";", nil, `xxx..."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseQuery(tt.raw)
			if tt.detail == "" {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Errorf("ParseQuery(%q) = %v, %v; want %v, nil", tt.raw, got, err, tt.want)
				}
				return
			}
			if apperr.KindOf(err) != apperr.BadRequest || !strings.Contains(apperr.MessageOf(err), tt.detail) {
				t.Errorf("ParseQuery(%q) = %v, want a BadRequest error containing %q", tt.raw, err, tt.detail)
			}
		})
	}
}

// TestMalformedQueryIs400OnEveryRoute drives NewRouter: the check runs
// before any route, so no handler can forget it, and an unknown route
// with a bad query says so too.
func TestMalformedQueryIs400OnEveryRoute(t *testing.T) {
	r := NewRouter(newTestLogger(io.Discard), nil, TrustedProxies{})
	r.GET("/items", func(c *gin.Context) { c.String(http.StatusOK, Query(c).Get("sortby")) })
	tests := []struct {
		target string
		status int
		body   string
	}{
		{"/items?sortby=name", 200, "name"},
		{"/items?sortby=name%3Bdrop", 200, "name;drop"},
		{"/items?sortby=name;drop", 400, `{"detail":"The query parameter \"sortby=name;drop\" contains a ';': separate parameters with '\u0026', and write a ';' within a value as %3B."}`},
		{"/items?q=%zz", 400, ""},
		{"/nowhere?a;b", 400, ""},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", tt.target, nil))
		if w.Code != tt.status {
			t.Errorf("GET %s = %d %s, want %d", tt.target, w.Code, w.Body, tt.status)
			continue
		}
		if tt.status == 400 {
			var d Detail
			if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Detail == "" {
				t.Errorf("GET %s: body %s, want {\"detail\": ...}", tt.target, w.Body)
			}
		}
		if tt.body != "" && strings.TrimSpace(w.Body.String()) != tt.body {
			t.Errorf("GET %s: body %s, want %s", tt.target, w.Body, tt.body)
		}
	}
}

// FuzzParseQuery holds ParseQuery to url.ParseQuery: the same values
// whenever Go's parser keeps every pair, and otherwise a 400 whose detail
// is short, valid UTF-8 and quotes the client's text rather than echoing
// it.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "a=1&b=2", "sortby=name;drop", "q=%zz", "%", "a=%E2%82", ";", "=&=", "a=1;", "\xff=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := ParseQuery(raw)
		want, werr := url.ParseQuery(raw)
		if werr == nil {
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseQuery(%q) = %v, %v; want %v, nil", raw, got, err, want)
			}
			return
		}
		msg := apperr.MessageOf(err)
		if apperr.KindOf(err) != apperr.BadRequest || msg == "" {
			t.Fatalf("ParseQuery(%q) = %v, want a BadRequest error (url.ParseQuery: %v)", raw, err, werr)
		}
		if !utf8.ValidString(msg) || len(msg) > 400 {
			t.Fatalf("ParseQuery(%q): detail %q is not short valid UTF-8", raw, msg)
		}
	})
}
