package main

import (
	"io"
	"log/slog"
	"os"

	"golang.org/x/term"

	"github.com/geogate/geogate/internal/config"
)

// newLogger writes s's level of logs to w: text for a person when w is a
// terminal (or LOG_FORMAT=text), JSON for a log pipeline otherwise.
func newLogger(w io.Writer, s config.Server) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.LogLevel))
	o := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "text" || (s.LogFormat == "auto" && isTerminal(w)) {
		return slog.New(slog.NewTextHandler(w, o))
	}
	return slog.New(slog.NewJSONHandler(w, o))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
