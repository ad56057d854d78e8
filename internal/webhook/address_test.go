package webhook

import (
	"strings"
	"testing"
)

func TestCheckWebhook(t *testing.T) {
	tests := []struct {
		url                string
		allowHTTP, private bool
		want               string // "" or a piece of the message
	}{
		{"https://hooks.example.com/geo", false, false, ""},
		{"http://hooks.example.com/geo", false, false, "Must be https"},
		{"http://hooks.example.com/geo", true, false, ""},
		{"https://127.0.0.1:8443/hook", false, false, "private network"},
		{"http://localhost/hook", true, false, "private network"},
		{"https://[::1]/hook", false, false, "private network"},
		{"https://169.254.169.254/latest/meta-data", false, false, "private network"},
		{"https://10.1.2.3/hook", false, false, "private network"},
		{"https://[::ffff:192.168.0.1]/hook", false, false, "private network"},
		{"https://100.64.0.1/hook", false, false, "private network"},
		{"https://0.0.0.0/hook", false, false, "private network"},
		{"http://127.0.0.1:9000/hook", false, true, ""},
		{"http://10.0.0.5/hook", false, true, ""},
		{"https://u:p@hooks.example.com/", false, false, "credentials"},
		{"ftp://hooks.example.com/", false, false, "absolute http(s)"},
		{"/relative", false, false, "absolute http(s)"},
	}
	for _, tt := range tests {
		got := Rules{AllowHTTP: tt.allowHTTP, AllowPrivate: tt.private}.Check(tt.url)
		if (tt.want == "") != (got == "") || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("Check(%q, http %v, private %v) = %q, want %q", tt.url, tt.allowHTTP, tt.private, got, tt.want)
		}
	}
}
