package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/geogate/geogate/internal/config"
)

// TestLogFormat: logs are JSON for a pipe or a file and text for a
// person at a terminal, unless LOG_FORMAT says otherwise.
func TestLogFormat(t *testing.T) {
	pty := openPTY(t)
	tests := []struct {
		name, format string
		terminal     bool
		wantJSON     bool
	}{
		{"AutoPipe", "auto", false, true},
		{"AutoTerminal", "auto", true, false},
		{"TextPipe", "text", false, false},
		{"JSONTerminal", "json", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var w io.Writer = &buf
			if tt.terminal {
				w = pty.writer
			}
			newLogger(w, config.Server{LogLevel: "info", LogFormat: tt.format}).Info("listening", "url", "http://localhost:1")
			line := buf.String()
			if tt.terminal {
				line = pty.read(t)
			}
			isJSON := json.Valid([]byte(strings.TrimSpace(line)))
			if isJSON != tt.wantJSON || !strings.Contains(line, "listening") {
				t.Errorf("log line %q: JSON %v, want %v", line, isJSON, tt.wantJSON)
			}
		})
	}
}

// pty is a pseudo-terminal: writes to writer, the terminal side, come out
// of reader.
type pty struct {
	writer *os.File
	reader *os.File
}

func (p pty) read(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4096)
	n, err := p.reader.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

// openPTY opens a pseudo-terminal pair through /dev/ptmx.
func openPTY(t *testing.T) pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return pty{writer: slave, reader: master}
}
