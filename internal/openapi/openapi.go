// Package openapi holds geogate's API description: an OpenAPI 3.1 document
// written by hand in openapi.yaml and served as JSON, and the interactive
// documentation pages (Swagger UI on /docs, ReDoc on /redoc) built from
// vendored, embedded assets so that they work offline.
//
// The document is a contract: the tests in package contract validate every
// request and response of the integration suite against it, and check that
// the router serves exactly the documented routes.
package openapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/goccy/go-yaml"
)

//go:embed openapi.yaml
var source []byte

//go:embed assets
var assets embed.FS

var document = sync.OnceValues(func() ([]byte, error) {
	b, err := yaml.YAMLToJSON(source)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return out.Bytes(), nil
})

// YAML returns the document as written.
func YAML() []byte { return source }

// JSON returns the document as served on /openapi.json, keys in the order
// they are written. It errs only when the embedded YAML does not parse.
func JSON() ([]byte, error) { return document() }
