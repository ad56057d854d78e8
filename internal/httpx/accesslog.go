package httpx

import (
	"net/url"
	"strings"
)

// secretParams are query parameters that may carry a credential: clients
// that cannot send headers (web maps, some GIS tools) put keys and tokens
// in the URL, and the access log must not keep them.
var secretParams = map[string]bool{
	"key": true, "apikey": true, "api_key": true, "api-key": true, "x-api-key": true,
	"token": true, "access_token": true, "id_token": true, "refresh_token": true, "jwt": true,
	"auth": true, "authorization": true, "password": true, "passwd": true, "secret": true,
	"client_secret": true, "sig": true, "signature": true, "code": true,
}

// maxLoggedQuery bounds the query string in a log line; a longer one is
// cut and marked, so that a client cannot fill the logs.
const maxLoggedQuery = 1024

// Redacted marks what the access log leaves out.
const Redacted = "REDACTED"

// RedactedQuery returns raw, a URL's query string as sent, with the value
// of every parameter named in secretParams (case-insensitively) replaced by
// REDACTED, and cut to maxLoggedQuery bytes. Everything else stays as the
// client encoded it, so a log line shows what was asked.
func RedactedQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if hasValue && secretParams[strings.ToLower(strings.TrimSpace(name))] {
			parts[i] = p[:strings.IndexByte(p, '=')+1] + Redacted
		}
	}
	q := strings.Join(parts, "&")
	if len(q) > maxLoggedQuery {
		q = q[:maxLoggedQuery] + "..."
	}
	return q
}
