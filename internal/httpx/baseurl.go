package httpx

import (
	"net/http"
	"strings"
)

// BaseURL is the scheme and host clients reach this service at: public
// when it is configured, else the request's, where X-Forwarded-Proto and
// X-Forwarded-Host count only when the peer is a trusted proxy. Links in
// TileJSON and OGC API documents start with it.
func BaseURL(r *http.Request, public string) string {
	if public != "" {
		return public
	}
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if ClientOf(r).ViaProxy {
		if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
			scheme = p
		}
		if fh := firstValue(r.Header.Get("X-Forwarded-Host")); validHost(fh) {
			host = fh
		}
	}
	if !validHost(host) {
		host = "localhost"
	}
	return scheme + "://" + host
}

func firstValue(h string) string {
	v, _, _ := strings.Cut(h, ",")
	return strings.ToLower(strings.TrimSpace(v))
}

// validHost accepts a host name or address with an optional port and
// nothing else, so that a header cannot inject a path or a scheme.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		ch := h[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']'
		if !ok {
			return false
		}
	}
	return true
}
