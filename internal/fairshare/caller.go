package fairshare

import "context"

// caller is who a request is served as: the identity whose use is counted
// and its weight.
type caller struct {
	id     string
	weight int
}

type callerKey struct{}

// anonymous is the caller of a request that names none: all such requests
// share one identity of weight 1.
var anonymous = caller{id: "", weight: 1}

// WithCaller returns ctx naming the identity its database calls are
// counted against, and that identity's weight (1 or more; less counts as
// 1).
func WithCaller(ctx context.Context, id string, weight int) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{id: id, weight: max(weight, 1)})
}

func callerOf(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return anonymous
}
