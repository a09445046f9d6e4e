package rules

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"github.com/kestrelops/tandem/exporter/verdict"
)

// Options are the thresholds, windows and durations of the generated rules.
// Shares and regressions are fractions: 0.1 means 10%.
type Options struct {
	// Window is the range of every rate and increase. Default 5m.
	Window time.Duration
	// EvaluationInterval is the interval of both rule groups; zero leaves it
	// to Prometheus's global evaluation_interval. Default 0.
	EvaluationInterval time.Duration
	// MinCompleted is the number of completed requests each arm needs in the
	// window before the arms are compared, and production needs before its
	// objective is checked. Default verdict.MinPairs, the pairs the report
	// needs before it judges a class.
	MinCompleted int

	// TTFTRegression is how far, as a fraction of A's, B's TTFT p95 may
	// exceed A's. Default verdict.Margin, the report's equivalence margin:
	// the alert fires where the report's point estimate of B - A is above
	// the margin that its slower verdict needs the whole interval above.
	TTFTRegression    float64
	TTFTRegressionFor time.Duration // Default 10m.

	// OutputRateRegression is how far B's output tokens/s may fall below A's.
	// Default 0.1.
	OutputRateRegression    float64
	OutputRateRegressionFor time.Duration // Default 10m.

	// ShadowErrorShare is the share of an arm's requests that may end in
	// error, timeout or a cut stream. Default 0.05.
	ShadowErrorShare float64
	ShadowErrorsFor  time.Duration // Default 5m.

	// MirrorOverloadedShare is the share of sampled requests that may be
	// skipped because an arm was at its in-flight limit. Default 0.05.
	MirrorOverloadedShare float64
	MirrorSaturatedFor    time.Duration // Default 10m.

	// TokenMismatchShare is the share of both-completed pairs that may differ
	// in output token count. Default 0.05.
	TokenMismatchShare float64
	TokenMismatchFor   time.Duration // Default 15m.

	// ProductionTTFTObjective is the highest acceptable production TTFT p95.
	// Default 2s.
	ProductionTTFTObjective time.Duration
	ProductionTTFTFor       time.Duration // Default 10m.

	// RunbookURL is the document holding the runbook; each alert links to
	// the anchor of its own name (#tandemttftregression). Default the
	// README on GitHub.
	RunbookURL string

	// Critical thresholds: each alert fires with severity "warning" past
	// its threshold above and again with severity "critical" past these,
	// with the same for duration. Each must be worse than its warning
	// threshold; zero turns that critical alert off.
	TTFTRegressionCritical        float64       // Default 0.3.
	OutputRateRegressionCritical  float64       // Default 0.3.
	ShadowErrorShareCritical      float64       // Default 0.2.
	MirrorOverloadedShareCritical float64       // Default 0.2.
	TokenMismatchShareCritical    float64       // Default 0.2.
	ProductionTTFTCritical        time.Duration // Default 5s.
}

// Severities of the generated alerts, the value of their severity label.
const (
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Window:                  5 * time.Minute,
		MinCompleted:            verdict.MinPairs,
		TTFTRegression:          verdict.Margin,
		TTFTRegressionFor:       10 * time.Minute,
		OutputRateRegression:    0.1,
		OutputRateRegressionFor: 10 * time.Minute,
		ShadowErrorShare:        0.05,
		ShadowErrorsFor:         5 * time.Minute,
		MirrorOverloadedShare:   0.05,
		MirrorSaturatedFor:      10 * time.Minute,
		TokenMismatchShare:      0.05,
		TokenMismatchFor:        15 * time.Minute,
		ProductionTTFTObjective: 2 * time.Second,
		ProductionTTFTFor:       10 * time.Minute,
		RunbookURL:              "https://github.com/kestrelops/tandem/blob/main/README.md",

		TTFTRegressionCritical:        0.3,
		OutputRateRegressionCritical:  0.3,
		ShadowErrorShareCritical:      0.2,
		MirrorOverloadedShareCritical: 0.2,
		TokenMismatchShareCritical:    0.2,
		ProductionTTFTCritical:        5 * time.Second,
	}
}

// RegisterFlags defines one flag per option on fs, defaulting to o's current
// values.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.Window, "window", o.Window, "range of every rate and increase")
	fs.DurationVar(&o.EvaluationInterval, "evaluation-interval", o.EvaluationInterval, "rule group interval; 0 uses Prometheus's global evaluation_interval")
	fs.IntVar(&o.MinCompleted, "min-completed", o.MinCompleted, "completed requests each arm needs in the window before the arms are compared")
	fs.Float64Var(&o.TTFTRegression, "ttft-regression", o.TTFTRegression, "fraction by which B's TTFT p95 may exceed A's")
	fs.DurationVar(&o.TTFTRegressionFor, "ttft-regression-for", o.TTFTRegressionFor, "for duration of TandemTTFTRegression")
	fs.Float64Var(&o.OutputRateRegression, "output-rate-regression", o.OutputRateRegression, "fraction by which B's output tokens/s may fall below A's")
	fs.DurationVar(&o.OutputRateRegressionFor, "output-rate-regression-for", o.OutputRateRegressionFor, "for duration of TandemOutputRateRegression")
	fs.Float64Var(&o.ShadowErrorShare, "shadow-error-share", o.ShadowErrorShare, "share of an arm's requests that may end in error, timeout or a cut stream")
	fs.DurationVar(&o.ShadowErrorsFor, "shadow-errors-for", o.ShadowErrorsFor, "for duration of TandemShadowErrors")
	fs.Float64Var(&o.MirrorOverloadedShare, "mirror-overloaded-share", o.MirrorOverloadedShare, "share of sampled requests that may be skipped as overloaded")
	fs.DurationVar(&o.MirrorSaturatedFor, "mirror-saturated-for", o.MirrorSaturatedFor, "for duration of TandemMirrorSaturated")
	fs.Float64Var(&o.TokenMismatchShare, "token-mismatch-share", o.TokenMismatchShare, "share of both-completed pairs that may differ in output tokens")
	fs.DurationVar(&o.TokenMismatchFor, "token-mismatch-for", o.TokenMismatchFor, "for duration of TandemPairTokenMismatch")
	fs.DurationVar(&o.ProductionTTFTObjective, "production-ttft-objective", o.ProductionTTFTObjective, "highest acceptable production TTFT p95")
	fs.DurationVar(&o.ProductionTTFTFor, "production-ttft-for", o.ProductionTTFTFor, "for duration of TandemProductionTTFTHigh")
	fs.StringVar(&o.RunbookURL, "runbook-url", o.RunbookURL, "document holding the runbook; alerts link to #<alertname in lower case>")

	fs.Float64Var(&o.TTFTRegressionCritical, "ttft-regression-critical", o.TTFTRegressionCritical, "like -ttft-regression, for severity critical; 0 turns it off")
	fs.Float64Var(&o.OutputRateRegressionCritical, "output-rate-regression-critical", o.OutputRateRegressionCritical, "like -output-rate-regression, for severity critical; 0 turns it off")
	fs.Float64Var(&o.ShadowErrorShareCritical, "shadow-error-share-critical", o.ShadowErrorShareCritical, "like -shadow-error-share, for severity critical; 0 turns it off")
	fs.Float64Var(&o.MirrorOverloadedShareCritical, "mirror-overloaded-share-critical", o.MirrorOverloadedShareCritical, "like -mirror-overloaded-share, for severity critical; 0 turns it off")
	fs.Float64Var(&o.TokenMismatchShareCritical, "token-mismatch-share-critical", o.TokenMismatchShareCritical, "like -token-mismatch-share, for severity critical; 0 turns it off")
	fs.DurationVar(&o.ProductionTTFTCritical, "production-ttft-critical", o.ProductionTTFTCritical, "like -production-ttft-objective, for severity critical; 0 turns it off")
}

// Validate reports every invalid option, each error naming its flag.
func (o Options) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("-%s must be positive, got %s", name, d))
		}
	}
	nonNegative := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("-%s must not be negative, got %s", name, d))
		}
	}
	fraction := func(name string, f float64) {
		if !(f > 0 && f < 1) {
			errs = append(errs, fmt.Errorf("-%s must be between 0 and 1 (exclusive), got %g", name, f))
		}
	}
	positive("window", o.Window)
	nonNegative("evaluation-interval", o.EvaluationInterval)
	if o.MinCompleted < 1 {
		errs = append(errs, fmt.Errorf("-min-completed must be at least 1, got %d", o.MinCompleted))
	}
	fraction("ttft-regression", o.TTFTRegression)
	nonNegative("ttft-regression-for", o.TTFTRegressionFor)
	fraction("output-rate-regression", o.OutputRateRegression)
	nonNegative("output-rate-regression-for", o.OutputRateRegressionFor)
	fraction("shadow-error-share", o.ShadowErrorShare)
	nonNegative("shadow-errors-for", o.ShadowErrorsFor)
	fraction("mirror-overloaded-share", o.MirrorOverloadedShare)
	nonNegative("mirror-saturated-for", o.MirrorSaturatedFor)
	fraction("token-mismatch-share", o.TokenMismatchShare)
	nonNegative("token-mismatch-for", o.TokenMismatchFor)
	positive("production-ttft-objective", o.ProductionTTFTObjective)
	nonNegative("production-ttft-for", o.ProductionTTFTFor)
	if u, err := url.Parse(o.RunbookURL); err != nil || !u.IsAbs() || u.Fragment != "" {
		errs = append(errs, fmt.Errorf("-runbook-url must be an absolute URL without a fragment, got %q", o.RunbookURL))
	}
	critical := func(name string, f, warning float64) {
		switch {
		case f == 0:
		case !(f > 0 && f < 1):
			errs = append(errs, fmt.Errorf("-%s-critical must be between 0 and 1 (exclusive), or 0 for none, got %g", name, f))
		case warning > 0 && warning < 1 && f <= warning:
			errs = append(errs, fmt.Errorf("-%s-critical must be above -%s (%g), got %g", name, name, warning, f))
		}
	}
	critical("ttft-regression", o.TTFTRegressionCritical, o.TTFTRegression)
	critical("output-rate-regression", o.OutputRateRegressionCritical, o.OutputRateRegression)
	critical("shadow-error-share", o.ShadowErrorShareCritical, o.ShadowErrorShare)
	critical("mirror-overloaded-share", o.MirrorOverloadedShareCritical, o.MirrorOverloadedShare)
	critical("token-mismatch-share", o.TokenMismatchShareCritical, o.TokenMismatchShare)
	if c := o.ProductionTTFTCritical; c != 0 && c <= o.ProductionTTFTObjective {
		errs = append(errs, fmt.Errorf("-production-ttft-critical must be above -production-ttft-objective (%s), or 0 for none, got %s", o.ProductionTTFTObjective, c))
	}
	return errors.Join(errs...)
}
