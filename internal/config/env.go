package config

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// reader reads typed settings from the environment and collects every
// problem, so that one start-up names all bad settings at once.
type reader struct {
	getenv func(string) string
	errs   []string
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

func (r *reader) fail(name, val, why string) {
	r.errs = append(r.errs, fmt.Sprintf("%s=%q: %s", name, val, why))
}

func (r *reader) integer(name string, def, min, max int) int {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.fail(name, v, "not an integer")
		return def
	}
	if n < min || n > max {
		r.fail(name, v, fmt.Sprintf("must be between %d and %d", min, max))
		return def
	}
	return n
}

func (r *reader) number(name string, def, min, max float64) float64 {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) {
		r.fail(name, v, "not a number")
		return def
	}
	if n < min || n > max {
		r.fail(name, v, fmt.Sprintf("must be between %g and %g", min, max))
		return def
	}
	return n
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, v, "not a positive duration such as 500ms, 2s or 1m")
		return def
	}
	return d
}

// durationOrZero is duration that also accepts 0 (off).
func (r *reader) durationOrZero(name string, def time.Duration) time.Duration {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "not a duration such as 0s, 500ms or 5s")
		return def
	}
	return d
}

func (r *reader) boolean(name string, def bool) bool {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "not a boolean (true or false)")
		return def
	}
	return b
}

func (r *reader) list(name string, def []string) []string {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// urlWithScheme checks that v parses as a URL with one of the schemes.
func (r *reader) urlWithScheme(name, v string, schemes ...string) {
	u, err := url.Parse(v)
	if err != nil {
		r.fail(name, redact(v), "not a URL")
		return
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return
		}
	}
	r.fail(name, redact(v), "scheme must be one of "+strings.Join(schemes, ", "))
}

// redact hides a password in a URL so that error messages can quote it.
func redact(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		// Unparseable: hide whatever sits between the scheme and an '@'.
		if i, j := strings.Index(v, "://"), strings.LastIndex(v, "@"); i >= 0 && j > i {
			return v[:i+3] + "xxxxx" + v[j:]
		}
		return v
	}
	if u.User == nil {
		return v
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// optInt is integer for a setting whose default lies elsewhere: def
// unless the variable is set (and valid).
func (r *reader) optInt(name string, def *int, min, max int) *int {
	if r.str(name, "") == "" {
		return def
	}
	before := len(r.errs)
	n := r.integer(name, 0, min, max)
	if len(r.errs) > before {
		return def
	}
	return &n
}
