package contract

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Route is one method and path a router serves, in the router's syntax.
type Route struct {
	Method string
	Path   string
}

var ginParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// TemplatePath turns a Gin path (/geofences/:id, /files/*path) into an
// OpenAPI path template (/geofences/{id}, /files/{path}).
func TemplatePath(ginPath string) string {
	return ginParam.ReplaceAllString(ginPath, "{$1}")
}

// CompareRoutes returns the served routes that the document lacks and the
// documented operations that nothing serves, each as "METHOD /path" and
// sorted. aliases maps a served OpenAPI path to the documented paths it
// stands for when one router route serves several documented paths (a
// parameter that carries a suffix such as {layer}.json). Routes for which
// skip returns true (the documentation UI) are left out.
func CompareRoutes(served []Route, doc *openapi3.T, aliases map[string][]string, skip func(path string) bool) (undocumented, unserved []string) {
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	have := map[string]bool{}
	for _, r := range served {
		if skip != nil && skip(r.Path) {
			continue
		}
		if r.Method == http.MethodHead || r.Method == http.MethodOptions {
			continue
		}
		p := TemplatePath(r.Path)
		paths := aliases[p]
		if paths == nil {
			paths = []string{p}
		}
		for _, p := range paths {
			k := r.Method + " " + p
			have[k] = true
			if !documented[k] {
				undocumented = append(undocumented, k)
			}
		}
	}
	for k := range documented {
		if !have[k] {
			unserved = append(unserved, k)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unserved)
	return undocumented, unserved
}

// Undocumented reports whether path belongs to the documentation UI, which
// is not part of the API description.
func Undocumented(path string) bool { return undocumented(path) }
