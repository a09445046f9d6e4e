package report

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/kestrelops/tandem/proxy/record"
)

// Exit codes of Run.
const (
	ExitOK         = 0
	ExitError      = 1
	ExitUsage      = 2
	ExitRegression = 3
	// ExitNoEvidence is returned with --require-evidence when a verdict
	// the gate reads is inconclusive, insufficient_data or invalid.
	ExitNoEvidence = 4
)

// Config is the configuration of the report subcommand. Exactly one source
// is set: Prometheus or Records.
type Config struct {
	// Prometheus is the base URL of a Prometheus that scrapes tandem.
	Prometheus string
	// Window is how far back from End the Prometheus source looks.
	Window time.Duration
	// End is the end of the Prometheus window, RFC 3339 or Unix seconds;
	// empty means now.
	End string
	// Experiment selects one tandem deployment when the Prometheus scrapes
	// several.
	Experiment Experiment
	// Records are files of per-request records (JSON lines).
	Records []string
	// Format is text, markdown or json.
	Format string
	// MinPairs is the number of pairs both arms completed that a class
	// needs before any claim is made about it.
	MinPairs int
	// Margin is the equivalence margin, a fraction of A's value.
	Margin float64
	// FailOnRegression makes Run return ExitRegression when B is
	// significantly worse than A.
	FailOnRegression bool
	// RequireEvidence makes Run return ExitNoEvidence when a verdict the
	// gate reads is not conclusive.
	RequireEvidence bool
}

// RegisterFlags binds c's fields to flags of fs, with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Prometheus, "prometheus", "", "base URL of the Prometheus that scrapes tandem, e.g. http://localhost:9090")
	fs.DurationVar(&c.Window, "window", 30*time.Minute, "with --prometheus: how far back from --end to look")
	fs.StringVar(&c.End, "end", "", "with --prometheus: end of the window, RFC 3339 or Unix seconds (default now)")
	fs.StringVar(&c.Experiment.Job, "job", "", "with --prometheus: the job label of the tandem to report on, when Prometheus scrapes several")
	fs.StringVar(&c.Experiment.Namespace, "namespace", "", "with --prometheus: the namespace label of the tandem to report on")
	fs.StringVar(&c.Experiment.Name, "experiment", "", "with --prometheus: the experiment label of the tandem to report on")
	fs.Func("records", "per-request records file (JSON lines); repeat the flag or separate files with commas", func(s string) error {
		for f := range strings.SplitSeq(s, ",") {
			if f != "" {
				c.Records = append(c.Records, f)
			}
		}
		return nil
	})
	fs.StringVar(&c.Format, "format", "text", "output format: "+strings.Join(Formats, ", "))
	fs.IntVar(&c.MinPairs, "min-pairs", DefaultOptions().MinPairs, "pairs completed on both arms that a class needs before any claim about it")
	fs.Float64Var(&c.Margin, "margin", DefaultOptions().Margin, "equivalence margin, a fraction of A's value: equivalent when the whole 95% interval of B - A lies within it")
	fs.BoolVar(&c.FailOnRegression, "fail-on-regression", false, fmt.Sprintf("exit with code %d when B's TTFT p95 is slower or its output rate lower in any class or the mix", ExitRegression))
	fs.BoolVar(&c.RequireEvidence, "require-evidence", false, fmt.Sprintf("exit with code %d when a TTFT p95 or output rate verdict of any class or the mix is inconclusive, insufficient_data or invalid", ExitNoEvidence))
}

// Validate reports the first invalid setting, naming its flag.
func (c Config) Validate() error {
	switch {
	case c.Prometheus == "" && len(c.Records) == 0:
		return errors.New("--prometheus or --records: one source is required")
	case c.Prometheus != "" && len(c.Records) > 0:
		return errors.New("--prometheus and --records: choose one source")
	}
	if c.Prometheus != "" {
		u, err := url.Parse(c.Prometheus)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--prometheus: %q is not an http or https URL", c.Prometheus)
		}
		if c.Window <= 0 {
			return fmt.Errorf("--window: must be positive, got %s", c.Window)
		}
	}
	if c.Experiment != (Experiment{}) && c.Prometheus == "" {
		return errors.New("--job, --namespace, --experiment: apply to --prometheus only")
	}
	if c.End != "" {
		if c.Prometheus == "" {
			return errors.New("--end: applies to --prometheus only")
		}
		if _, err := parseTime(c.End); err != nil {
			return fmt.Errorf("--end: %q is neither RFC 3339 nor Unix seconds", c.End)
		}
	}
	if !slices.Contains(Formats, c.Format) {
		return fmt.Errorf("--format: %q is not one of %s", c.Format, strings.Join(Formats, ", "))
	}
	if !(c.Margin >= 0 && c.Margin < 1) {
		return fmt.Errorf("--margin: must be at least 0 and below 1, got %g", c.Margin)
	}
	if c.MinPairs < 1 {
		return fmt.Errorf("--min-pairs: must be at least 1, got %d", c.MinPairs)
	}
	return nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, err
	}
	if !(math.Abs(f) < math.MaxInt64/float64(time.Second)) {
		return time.Time{}, fmt.Errorf("%g is not a Unix time in seconds", f)
	}
	return time.Unix(0, int64(f*float64(time.Second))).UTC(), nil
}

// ErrRegressed is wrapped by the error returned with ExitRegression.
var ErrRegressed = errors.New("B regressed against A")

// ErrNoEvidence is wrapped by the error returned with ExitNoEvidence.
var ErrNoEvidence = errors.New("not enough evidence to judge")

// Run builds the report from c's source and writes it to stdout in c's
// format. The exit code is ExitRegression when c.FailOnRegression is set and
// B regressed (with an error wrapping ErrRegressed that names each class and
// why), else ExitNoEvidence when c.RequireEvidence is set and a verdict the
// gate reads is not conclusive (with an error wrapping ErrNoEvidence),
// ExitUsage for an invalid c, ExitError with the error when the report could
// not be made, ExitOK otherwise; gate is then one line saying why the gate
// passed, empty when no gate was asked for.
func Run(ctx context.Context, c Config, stdout io.Writer) (exitCode int, gate string, err error) {
	if err := c.Validate(); err != nil {
		return ExitUsage, "", err
	}
	o := DefaultOptions()
	o.MinPairs, o.Margin = c.MinPairs, c.Margin
	var r *Report
	if c.Prometheus != "" {
		client, err := api.NewClient(api.Config{Address: c.Prometheus})
		if err != nil {
			return ExitError, "", err
		}
		end := time.Now()
		if c.End != "" {
			end, _ = parseTime(c.End)
		}
		r, err = FromPrometheus(ctx, v1.NewAPI(client), c.Window, end, c.Experiment, o)
		if err != nil {
			return ExitError, "", err
		}
	} else {
		recs, read, err := record.ReadFiles(c.Records...)
		if err != nil {
			return ExitError, "", err
		}
		if r, err = FromRecords(recs, read, o); err != nil {
			return ExitError, "", err
		}
	}
	if err := r.Write(stdout, c.Format); err != nil {
		return ExitError, "", err
	}
	if c.FailOnRegression {
		if why := r.Regressions(); len(why) > 0 {
			return ExitRegression, "", fmt.Errorf("%w: %s", ErrRegressed, strings.Join(why, "; "))
		}
	}
	if c.RequireEvidence {
		if why := r.Unsettled(); len(why) > 0 {
			return ExitNoEvidence, "", fmt.Errorf("%w: %s", ErrNoEvidence, strings.Join(why, "; "))
		}
	}
	switch {
	case c.RequireEvidence:
		return ExitOK, "gate passed: every class and the mix has a conclusive TTFT p95 and output rate verdict, none slower or lower", nil
	case c.FailOnRegression:
		return ExitOK, "gate passed: no class or the mix has B's TTFT p95 slower or its output rate lower", nil
	}
	return ExitOK, "", nil
}
