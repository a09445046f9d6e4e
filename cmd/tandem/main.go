// Command tandem compares two LLM serving configurations on live traffic.
// See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve":   {"run the proxy and exporter (configured by TANDEM_* variables)", runServe},
	"version": {"print the version", runVersion},
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
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tandem: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
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
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'tandem COMMAND -h' for a command's flags.")
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "tandem %s\n", version)
	return nil
}
