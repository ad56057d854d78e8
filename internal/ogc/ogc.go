// Package ogc holds what OGC API – Features and OGC API – Tiles share:
// the link object of their documents.
package ogc

// Link is a link of an OGC API document.
type Link struct {
	Href      string `json:"href"`
	Rel       string `json:"rel"`
	Type      string `json:"type,omitempty"`
	Title     string `json:"title,omitempty"`
	Templated bool   `json:"templated,omitempty"`
}
