package geofence

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodingJSON is what encoding/json writes for s with HTML escaping off.
func encodingJSON(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestAppendStringIsEncodingJSONs(t *testing.T) {
	for _, s := range []string{
		"", "Berlin", "São Paulo", `quote " and \ backslash`, "tab\tnew\nline\rcr",
		"\b\f\x00\x01\x1f\x7f", "a<b>&c", "line\u2028para\u2029", "bad \xff utf8 \xc3",
		"東京", "emoji 🗺", "\xed\xa0\x80 surrogate half",
	} {
		if got, want := string(appendString(nil, s)), encodingJSON(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "Berlin", "a\"b\\c\n", "\xff\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendString(nil, s)), encodingJSON(s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
