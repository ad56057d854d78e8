package main

import "github.com/geogate/geogate/internal/limits"

// quotaAnswer is the answer of GET /rate_limit, as the tests read it.
type quotaAnswer struct{ limits.QuotaAnswer }

type (
	policyQuota      = limits.PolicyQuota
	windowQuota      = limits.WindowQuota
	concurrencyQuota = limits.ConcurrencyQuota
)
