package main

import (
	"context"
	"fmt"
	"io"
)

func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return fmt.Errorf("import: not built yet")
}
