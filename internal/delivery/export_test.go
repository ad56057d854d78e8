package delivery

// ClaimSQL, ClaimWindow and WorkerSettingsSQL let the tests look at the
// claim's plan.
const (
	ClaimSQL          = claimSQL
	ClaimWindow       = claimWindow
	WorkerSettingsSQL = workerSettingsSQL
)
