package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/exporter/statuspage"
	"github.com/kestrelops/tandem/proxy/serve"
)

func runServe(ctx context.Context, fs *flag.FlagSet, args []string, _, stderr io.Writer) error {
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tandem serve\n\nConfigured by environment variables:")
		for _, v := range serve.ConfigVars() {
			fmt.Fprintf(stderr, "  %-30s %s", v.Name, v.Doc)
			if v.Default != "" {
				fmt.Fprintf(stderr, " (default %s)", v.Default)
			}
			fmt.Fprintln(stderr)
		}
	}
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	cfg, err := serve.LoadConfig(ctx, envconfig.OsLookuper())
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	return serve.Run(ctx, cfg, serve.Options{
		Version: version,
		Log:     log,
		Status: func(ctx context.Context, g prometheus.Gatherer) http.Handler {
			return statuspage.New(ctx, g, statuspage.Options{})
		},
	})
}

// flagError ends a command whose flags did not parse (the flag package has
// said why); -h ends it successfully.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return exitCode(0)
	}
	return exitCode(2)
}
