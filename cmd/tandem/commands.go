package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kestrelops/tandem/cmd/internal/bench"
	"github.com/kestrelops/tandem/cmd/internal/demo"
	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/cmd/internal/sim"
	"github.com/kestrelops/tandem/dashboards"
	"github.com/kestrelops/tandem/deploy/rules"
)

// newFlags returns cmd's flag set, printing to stderr.
func newFlags(cmd command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tandem %s %s\n\n%s.\n\nFlags:\n", cmd.name, cmd.synopsis, cmd.summary)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and refuses stray positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "tandem %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitCode(2)
	}
	return nil
}

func runDemo(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var c demo.Config
	c.RegisterFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return demo.Run(ctx, c, stdout, stderr)
}

func runSim(ctx context.Context, fs *flag.FlagSet, args []string, _, stderr io.Writer) error {
	var c sim.Config
	c.RegisterFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return sim.Serve(ctx, c, slog.New(slog.NewTextHandler(stderr, nil)))
}

func runLoadgen(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var c loadgen.Config
	c.RegisterFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	return loadgen.RunAndReport(ctx, c, stdout, stderr)
}

func runDashboards(_ context.Context, fs *flag.FlagSet, args []string, stdout, _ io.Writer) error {
	out := fs.String("out", "", "directory to write one JSON file per dashboard into (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required: the directory to write the dashboards into, e.g. dashboards/json")
	}
	if err := dashboards.Write(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote dashboards to %s\n", *out)
	return nil
}

func runRules(_ context.Context, fs *flag.FlagSet, args []string, stdout, _ io.Writer) error {
	o := rules.DefaultOptions()
	out := fs.String("out", "", "file to write the rules to; - for standard output (required)")
	o.RegisterFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required: the rule file to write, e.g. deploy/prometheus/rules.yml, or - for standard output")
	}
	b, err := rules.Generate(o)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err := stdout.Write(b)
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote rules to %s\n", *out)
	return nil
}

func runReport(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var c report.Config
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	c.Records = append(c.Records, fs.Args()...)
	code, gate, err := report.Run(ctx, c, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tandem report: %v\n", err)
	case gate != "":
		fmt.Fprintf(stderr, "tandem report: %s\n", gate)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

func runBench(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if os.Getenv(bench.ReferenceEnv) != "" {
		// This process is the reference proxy of a running benchmark.
		return bench.ServeReference(ctx)
	}
	var c bench.Config
	c.RegisterFlags(fs)
	// tandem runs as its own process by default, measured from /proc like nginx.
	if exe, err := os.Executable(); err == nil {
		fs.Lookup("tandem").DefValue = exe
		c.Tandem, c.DefaultTandem = exe, exe
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	return bench.Run(ctx, c, stdout, stderr)
}
