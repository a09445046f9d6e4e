// Command tandem compares two LLM serving configurations on live traffic.
// See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand. run gets a flag set named after it whose usage
// shows synopsis and summary.
type command struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error
}

// commands lists every subcommand, in the order usage prints them.
var commands = []command{
	{"bench", "[flags]", "measure tandem's overhead against direct and nginx", runBench},
	{"dashboards", "--out DIR", "write the Grafana dashboards as JSON", runDashboards},
	{"demo", "[flags]", "run production, A and B simulators, tandem and a load generator in one process", runDemo},
	{"loadgen", "[flags]", "send open-loop mixed load to an OpenAI-compatible API", runLoadgen},
	{"report", "(--prometheus URL --window D | --records FILE...) [flags]", "state what the evidence supports, from Prometheus or per-request records", runReport},
	{"rules", "--out FILE [flags]", "write the Prometheus recording and alerting rules", runRules},
	{"serve", "", "run the proxy and exporter (configured by TANDEM_* variables)", runServe},
	{"sim", "[flags]", "run an OpenAI-compatible engine simulator", runSim},
	{"version", "", "print the version", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// SIGHUP, by default fatal, would cut every stream: tandem has nothing
	// to reload, so it says so and goes on.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			fmt.Fprintln(os.Stderr, "tandem: SIGHUP ignored (nothing to reload; SIGTERM stops tandem gracefully)")
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "tandem: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	cmd := commands[i]
	if err := cmd.run(ctx, newFlags(cmd, stderr), args[1:], stdout, stderr); err != nil {
		if ec, ok := err.(exitCode); ok {
			return int(ec)
		}
		fmt.Fprintf(stderr, "tandem %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// exitCode lets a command end with a status other than 1 without printing
// an error (the command has said what it had to).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: tandem COMMAND [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'tandem COMMAND -h' for a command's flags.")
}

func runVersion(_ context.Context, _ *flag.FlagSet, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "tandem %s\n", version)
	return nil
}
