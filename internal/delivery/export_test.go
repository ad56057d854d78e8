package delivery

// ClaimSQL and ClaimWindow let the tests look at the claim's plan.
const (
	ClaimSQL    = claimSQL
	ClaimWindow = claimWindow
)
