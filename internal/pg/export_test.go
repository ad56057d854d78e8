package pg

// For the tests of package pg_test, which need testenv (which imports pg).
var (
	Provider    = provider
	WithSchemas = withSchemas
)
