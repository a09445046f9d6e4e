// Package report states what tandem's measurements support: per workload
// class and for the mix, it compares B with A on time to first token, system
// output rate and per-request output speed, checks that the comparison is
// like for like, and withholds any claim the data cannot carry.
//
// Quantiles are nearest-rank order statistics when read from per-request
// records and bucket interpolations when read from Prometheus native
// histograms; every interval is distribution-free (order statistics and the
// binomial distribution), and from histograms it is widened to bucket bounds.
// The quantiles of the mix come from the merged distribution of all requests,
// never from class results.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
)

// Verdicts describe B relative to A, in the vocabulary of package verdict.
const (
	Faster           = verdict.Faster
	Slower           = verdict.Slower
	Higher           = verdict.Higher
	Lower            = verdict.Lower
	Equivalent       = verdict.Equivalent
	Inconclusive     = verdict.Inconclusive
	InsufficientData = verdict.InsufficientData
	Invalid          = verdict.Invalid
)

// MixedClass is the class name of the merged traffic of all classes.
const MixedClass = "mixed"

// Options are the thresholds the report's checks use.
type Options struct {
	// MinPairs is the number of pairs both arms completed that a class needs
	// before any claim is made about it.
	MinPairs int
	// RateTolerance is the relative difference of output rates within which
	// they tie.
	RateTolerance float64
	// Margin is the equivalence margin, a fraction of A's value: a TTFT
	// quantile or per-request speed p50 is equivalent when the whole
	// interval of B - A lies within ±Margin·A.
	Margin float64
	// ParityTolerance is the share of pairs in which only one arm completed,
	// and separately the share of completed pairs with different output
	// token counts, above which the comparison is not like for like.
	ParityTolerance float64
	// MixTolerance is the total variation distance between the class mix of
	// mirrored and production traffic above which the mirrored mix is not
	// representative.
	MixTolerance float64
	// SkipTolerance is the share of sampled requests skipped as overloaded
	// above which the report warns.
	SkipTolerance float64
}

// DefaultOptions are the thresholds used unless told otherwise.
func DefaultOptions() Options {
	return Options{MinPairs: verdict.MinPairs, RateTolerance: 0.02, Margin: verdict.Margin, ParityTolerance: 0.01, MixTolerance: 0.10, SkipTolerance: 0.01}
}

// Report is what the evidence supports. Its JSON form is stable.
type Report struct {
	Source   string   `json:"source"`
	Window   Window   `json:"window"`
	Classes  []Class  `json:"classes"`
	Mixed    Class    `json:"mixed"`
	Validity Validity `json:"validity"`
	// Answer is one line per class and for the mix: B's TTFT p95 verdict
	// with both arms' figures.
	Answer            []string `json:"answer"`
	Decision          []string `json:"decision"`
	Because           []string `json:"because"`
	WhatWouldChangeIt []string `json:"what_would_change_it"`
	Definitions       []string `json:"definitions"`

	// mixReasons say why the merged traffic is not the mix to judge.
	mixReasons []string
}

// Window is the time the evidence covers.
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Class is the comparison of A and B on one workload class, or on the mix.
type Class struct {
	Class string         `json:"class"`
	Arms  map[string]Arm `json:"arms"`

	// TTFT compares B's TTFT p50, p95 and p99 with A's, in seconds.
	TTFT []Comparison `json:"ttft_seconds"`
	// PerRequestSpeed compares B's per-request output speed p50 with A's,
	// in tokens/s.
	PerRequestSpeed Comparison `json:"per_request_speed_p50"`

	TTFTP95DifferenceSeconds   Float    `json:"ttft_p95_difference_seconds"`
	TTFTP95DifferenceCISeconds Interval `json:"ttft_p95_difference_ci_seconds"`
	TTFTP95Verdict             string   `json:"ttft_p95_verdict"`
	// OutputRateRatio is B's system output rate over A's.
	OutputRateRatio Float `json:"output_rate_ratio"`
	// SteadyOutputRateRatio is B's steady-state output rate over A's; null
	// when the source has no steady-state window.
	SteadyOutputRateRatio Float `json:"steady_output_rate_ratio"`
	// SteadyState is the window the records source judges keeping up on;
	// absent for the Prometheus source, which judges on the query window.
	SteadyState       *SteadyState `json:"steady_state,omitempty"`
	OutputRateVerdict string       `json:"output_rate_verdict"`
	// OutputRateCase is OutputRateTie when both arms kept up with the same
	// arrivals, OutputRateAFellBehind or OutputRateBFellBehind when one
	// delivered less, OutputRateTooShort when the run cannot tell, and empty
	// when the data withholds the comparison.
	OutputRateCase         string `json:"output_rate_case,omitempty"`
	PerRequestSpeedVerdict string `json:"per_request_speed_verdict"`
	Paired                 Paired `json:"paired"`

	Pairs           PairCounts `json:"pair_results"`
	CompletedParity bool       `json:"completed_parity"`
	TokenParity     bool       `json:"token_parity"`
	// Withheld says why no claim is made, empty when the verdicts stand.
	Withheld string `json:"withheld,omitempty"`

	keepUp *KeepUpResult
	// pairRate is the pairs both arms completed per second of the class's
	// traffic.
	pairRate float64
}

// KeepUp is the judgement of keeping up behind SteadyState, whether or not
// a claim is made; false for the Prometheus source.
func (c Class) KeepUp() (KeepUpResult, bool) {
	if c.keepUp == nil {
		return KeepUpResult{}, false
	}
	return *c.keepUp, true
}

// Arm holds one configuration's figures on one class.
type Arm struct {
	Completed                            int      `json:"completed"`
	TTFTP50Seconds                       Float    `json:"ttft_p50_seconds"`
	TTFTP50CISeconds                     Interval `json:"ttft_p50_ci_seconds"`
	TTFTP95Seconds                       Float    `json:"ttft_p95_seconds"`
	TTFTP95CISeconds                     Interval `json:"ttft_p95_ci_seconds"`
	TTFTP99Seconds                       Float    `json:"ttft_p99_seconds"`
	TTFTP99CISeconds                     Interval `json:"ttft_p99_ci_seconds"`
	OutputTokens                         Float    `json:"output_tokens"`
	OutputTokensPerSecond                Float    `json:"output_tokens_per_second"`
	SteadyOutputTokensPerSecond          Float    `json:"steady_output_tokens_per_second"`
	PerRequestOutputTokensPerSecondP50   Float    `json:"per_request_output_tokens_per_second_p50"`
	PerRequestOutputTokensPerSecondP50CI Interval `json:"per_request_output_tokens_per_second_p50_ci"`
	ITLP50Seconds                        Float    `json:"itl_p50_seconds"`
	ITLP95Seconds                        Float    `json:"itl_p95_seconds"`
}

// SteadyState is the steady-state window of KeepUp: from the first request
// start plus the warm-up to the last request start.
type SteadyState struct {
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	WarmUpSeconds Float     `json:"warm_up_seconds"`
	// Requests counts each arm's completed requests started in the window.
	Requests map[string]int `json:"requests"`
	// ArrivalOutputTokensPerSecond is each arm's output tokens of the
	// completed requests started in the window, over its length: the rate
	// an arm that kept up delivers.
	ArrivalOutputTokensPerSecond map[string]Float `json:"arrival_output_tokens_per_second"`
	// EdgeNoise is KeepUpResult.EdgeNoise: the relative difference of the
	// steady-state rates that the window's edges can make by chance.
	EdgeNoise Float `json:"edge_noise"`
	// TooShort says why the window cannot judge capacity.
	TooShort string `json:"too_short,omitempty"`
}

// Comparison is B against A on one quantile of one quantity.
type Comparison struct {
	Quantile Float `json:"quantile"`
	A        Float `json:"a"`
	B        Float `json:"b"`
	// Difference is B - A, DifferenceCI its 95% interval.
	Difference   Float    `json:"difference"`
	DifferenceCI Interval `json:"difference_ci"`
	// Ratio is B / A, RatioCI its 95% interval.
	Ratio   Float    `json:"ratio"`
	RatioCI Interval `json:"ratio_ci"`
	// Method is MethodPaired or MethodUnpaired.
	Method string `json:"method"`
	// Margin is the equivalence margin in the quantity's units.
	Margin  Float  `json:"margin"`
	Verdict string `json:"verdict"`
	// MinimumDetectable is the smallest difference, either way, that a run
	// with this interval's width finds with 80% power.
	MinimumDetectable Float `json:"minimum_detectable"`
	// MorePairs is how many more pairs would likely make an inconclusive
	// verdict conclusive, at the same spread; MoreSeconds how long they
	// take at this run's pair rate. Zero when the verdict is conclusive.
	MorePairs   int   `json:"more_pairs,omitempty"`
	MoreSeconds Float `json:"more_seconds,omitempty"`
}

// Methods of a Comparison's intervals.
const (
	// MethodPaired is a percentile bootstrap over pairs of the same
	// request on both arms.
	MethodPaired = "paired_bootstrap"
	// MethodUnpaired subtracts each arm's distribution-free interval at
	// 97.5%, for sources without pairs.
	MethodUnpaired = "unpaired_order_statistics"
)

// Paired is the evidence from the same request on both arms.
type Paired struct {
	Pairs                   int      `json:"pairs"`
	BFasterShare            Float    `json:"b_faster_share"`
	BFasterShareCI          Interval `json:"b_faster_share_ci"`
	MedianDifferenceSeconds Float    `json:"median_difference_seconds"`
	// MedianDifferenceCISeconds is the sign-test interval of the median
	// paired difference: order statistics of the differences.
	MedianDifferenceCISeconds Interval `json:"median_difference_ci_seconds"`
}

// PairCounts counts mirrored requests by the outcome of both arms.
type PairCounts struct {
	BothCompleted   int `json:"both_completed"`
	AFailed         int `json:"a_failed"`
	BFailed         int `json:"b_failed"`
	BothFailed      int `json:"both_failed"`
	TokenMismatches int `json:"output_tokens_mismatch"`
}

func (p PairCounts) total() int { return p.BothCompleted + p.AFailed + p.BFailed + p.BothFailed }

// Validity sums up the checks made before any claim.
type Validity struct {
	CompletedParity bool `json:"completed_parity"`
	TokenParity     bool `json:"token_parity"`
	// SkippedShare is the share of sampled requests not mirrored because an
	// arm was overloaded; null when the source does not record it.
	SkippedShare Float `json:"skipped_share"`
	// ClassMixDistance is the total variation distance between the class
	// mix of mirrored and production traffic; null without production data.
	ClassMixDistance Float    `json:"class_mix_distance"`
	Warnings         []string `json:"warnings"`
}

// Regressed reports whether B is worse than A in any class or the mix: a
// slower TTFT p95 or a lower output rate.
func (r *Report) Regressed() bool { return len(r.Regressions()) > 0 }

// gated are the verdicts the gate reads, by name.
var gated = []struct {
	name    string
	verdict func(Class) string
}{
	{"TTFT p95", func(c Class) string { return c.TTFTP95Verdict }},
	{"output rate", func(c Class) string { return c.OutputRateVerdict }},
}

// Regressions names each class (or the mix) and measure where B is worse:
// a slower TTFT p95 or a lower output rate.
func (r *Report) Regressions() []string {
	var out []string
	for _, c := range r.allClasses() {
		for _, g := range gated {
			if v := g.verdict(c); v == Slower || v == Lower {
				out = append(out, fmt.Sprintf("%s %s %s (%s)", c.Class, g.name, v, gateFigures(c, g.name)))
			}
		}
	}
	return out
}

// Unsettled names each class (or the mix) and measure whose verdict is
// inconclusive, insufficient_data or invalid.
func (r *Report) Unsettled() []string {
	var out []string
	for _, c := range r.allClasses() {
		for _, g := range gated {
			if v := g.verdict(c); !verdict.Conclusive(v) {
				out = append(out, fmt.Sprintf("%s %s %s (%s)", c.Class, g.name, v, gateFigures(c, g.name)))
			}
		}
	}
	return out
}

func gateFigures(c Class, measure string) string {
	if measure == "TTFT p95" {
		p95 := c.TTFT[1]
		return fmt.Sprintf("B %s vs A %s, %s, %d pairs", seconds(float64(p95.B)), seconds(float64(p95.A)), relative(p95), c.Pairs.BothCompleted)
	}
	return fmt.Sprintf("B %s vs A %s tokens/s", rate(c.Arms[exporter.ConfigB].OutputTokensPerSecond), rate(c.Arms[exporter.ConfigA].OutputTokensPerSecond))
}

// Float is a number that is null in JSON when it is not finite.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// Interval is a closed interval [lo, hi]; a bound the data cannot give is
// infinite, and null in JSON.
type Interval [2]float64

// MarshalJSON implements json.Marshaler.
func (i Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]Float{Float(i[0]), Float(i[1])})
}

func (i Interval) includesZero() bool { return i[0] <= 0 && i[1] >= 0 }

func (i Interval) bounded() bool {
	return !math.IsInf(i[0], 0) && !math.IsInf(i[1], 0) && !math.IsNaN(i[0]) && !math.IsNaN(i[1])
}
