package features

import (
	"net/url"
)

// parseFilter reads filter, filter-lang and filter-crs.
func (s *Service) parseFilter(l *layerSQL, v url.Values) (*filter, error) {
	if !v.Has("filter") {
		for _, p := range []string{"filter-lang", "filter-crs"} {
			if v.Has(p) {
				return nil, bad("%s is given without a filter.", p)
			}
		}
		return nil, nil
	}
	return nil, bad("filter: CQL2 filters are not served yet.")
}

// filterConformance lists the filtering classes implemented.
func (s *Service) filterConformance() []string { return nil }
