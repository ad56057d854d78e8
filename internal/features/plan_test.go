package features

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestServiceKnowsNoGin: only the handler's file may import Gin or the
// HTTP helpers, so that the Service stays callable with a context alone
// (bench/features, the event filters).
func TestServiceKnowsNoGin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "http.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/gin-gonic/") || strings.HasSuffix(path, "/internal/httpx") || strings.HasSuffix(path, "/internal/gate") {
				t.Errorf("%s imports %s: only the Handler (http.go) may", f, path)
			}
		}
	}
}
