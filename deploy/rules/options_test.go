package rules_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/deploy/rules"
	"github.com/kestrelops/tandem/exporter/verdict"
)

func TestValidate(t *testing.T) {
	if err := rules.DefaultOptions().Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
	for _, tc := range []struct {
		change func(*rules.Options)
		want   string
	}{
		{func(o *rules.Options) { o.Window = 0 }, "-window must be positive, got 0s"},
		{func(o *rules.Options) { o.EvaluationInterval = -time.Second }, "-evaluation-interval must not be negative, got -1s"},
		{func(o *rules.Options) { o.MinCompleted = 0 }, "-min-completed must be at least 1, got 0"},
		{func(o *rules.Options) { o.TTFTRegression = 0 }, "-ttft-regression must be between 0 and 1 (exclusive), got 0"},
		{func(o *rules.Options) { o.TTFTRegressionFor = -time.Minute }, "-ttft-regression-for must not be negative, got -1m0s"},
		{func(o *rules.Options) { o.OutputRateRegression = 1 }, "-output-rate-regression must be between 0 and 1 (exclusive), got 1"},
		{func(o *rules.Options) { o.ShadowErrorShare = 5 }, "-shadow-error-share must be between 0 and 1 (exclusive), got 5"},
		{func(o *rules.Options) { o.MirrorOverloadedShare = -0.1 }, "-mirror-overloaded-share must be between 0 and 1 (exclusive), got -0.1"},
		{func(o *rules.Options) { o.TokenMismatchShare = 0 }, "-token-mismatch-share must be between 0 and 1 (exclusive), got 0"},
		{func(o *rules.Options) { o.ProductionTTFTObjective = 0 }, "-production-ttft-objective must be positive, got 0s"},
		{func(o *rules.Options) { o.TTFTRegressionCritical = 0.05 }, "-ttft-regression-critical must be above -ttft-regression (0.05), got 0.05"},
		{func(o *rules.Options) { o.ShadowErrorShareCritical = 1 }, "-shadow-error-share-critical must be between 0 and 1 (exclusive), or 0 for none, got 1"},
		{func(o *rules.Options) { o.ProductionTTFTCritical = time.Second }, "-production-ttft-critical must be above -production-ttft-objective (2s), or 0 for none, got 1s"},
		{func(o *rules.Options) { o.RunbookURL = "README.md" }, `-runbook-url must be an absolute URL without a fragment, got "README.md"`},
		{func(o *rules.Options) { o.RunbookURL = "https://example.com/r#runbook" }, `-runbook-url must be an absolute URL without a fragment, got "https://example.com/r#runbook"`},
	} {
		o := rules.DefaultOptions()
		tc.change(&o)
		err := o.Validate()
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if _, err := rules.Generate(o); err == nil {
			t.Errorf("Generate accepted options Validate rejects (%s)", tc.want)
		}
	}
}

func TestRegisterFlags(t *testing.T) {
	o := rules.DefaultOptions()
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	o.RegisterFlags(fs)
	if err := fs.Parse([]string{"-window=1m", "-evaluation-interval=1s", "-ttft-regression-for=0s", "-min-completed=5", "-ttft-regression=0.2"}); err != nil {
		t.Fatal(err)
	}
	want := rules.DefaultOptions()
	want.Window, want.EvaluationInterval, want.TTFTRegressionFor, want.MinCompleted, want.TTFTRegression = time.Minute, time.Second, 0, 5, 0.2
	if o != want {
		t.Errorf("after flags got %+v, want %+v", o, want)
	}
	if got := fs.Lookup("shadow-error-share").DefValue; got != "0.05" {
		t.Errorf("default of -shadow-error-share is %s, want 0.05", got)
	}
}

func TestGenerateHonoursOptions(t *testing.T) {
	o := rules.DefaultOptions()
	o.Window = time.Minute
	o.EvaluationInterval = time.Second
	o.TTFTRegressionFor = 0
	o.TTFTRegression = 0.25
	out := string(generate(t, o))
	for _, want := range []string{"interval: 1s", "[1m]", "> ignoring(config) 1.25 * "} {
		if !strings.Contains(out, want) {
			t.Errorf("generated rules lack %q", want)
		}
	}
	if strings.Contains(out, "[5m]") {
		t.Error("generated rules still use the default 5m window")
	}
	for _, r := range rules.Expressions(o) {
		if r.Alert == rules.AlertTTFTRegression && r.For != 0 {
			t.Errorf("%s has for %s, want 0", r.Alert, r.For)
		}
	}
}

func TestAlertsAreDocumented(t *testing.T) {
	var alerts int
	for _, r := range rules.Expressions(rules.DefaultOptions()) {
		if r.Alert == "" {
			continue
		}
		alerts++
		for _, key := range []string{"summary", "description"} {
			if r.Annotations[key] == "" {
				t.Errorf("%s has no %s", r.Alert, key)
			}
		}
		if want := "README.md#" + strings.ToLower(r.Alert); !strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s runbook_url %q does not end in %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	if alerts != 12 {
		t.Errorf("%d alerts, want 12: 6 names, each warning and critical", alerts)
	}
}

// TestDefaultsAreTheReports pins the link between the pager and the judge:
// the TTFT regression alert's threshold is the report's equivalence margin
// and its minimum count the report's minimum pairs.
func TestDefaultsAreTheReports(t *testing.T) {
	o := rules.DefaultOptions()
	if o.TTFTRegression != verdict.Margin || o.MinCompleted != verdict.MinPairs {
		t.Errorf("TTFT regression %g with %d completed per arm; the report's margin is %g with %d pairs",
			o.TTFTRegression, o.MinCompleted, verdict.Margin, verdict.MinPairs)
	}
}
