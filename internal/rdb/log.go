package rdb

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// slogAdapter sends go-redis's internal messages (dial failures, pool
// trouble) to the service's structured log instead of plain stderr.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Printf(ctx context.Context, format string, v ...any) {
	a.log.WarnContext(ctx, "redis client", "msg", fmt.Sprintf(format, v...))
}

// SetLogger routes go-redis's process-wide logger to log.
func SetLogger(log *slog.Logger) { redis.SetLogger(slogAdapter{log: log}) }
