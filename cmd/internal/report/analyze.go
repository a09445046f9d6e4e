package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// level is the confidence of every interval the report shows. A difference
// of two quantiles takes each arm's interval at bonferroniLevel, so the
// difference interval covers with at least level.
const (
	level           = 0.95
	bonferroniLevel = 1 - (1-level)/2
)

// armInput is what a source knows about one arm on one class.
type armInput struct {
	completed        int
	ttft, itl, speed distribution
	outputTokens     float64
	// seconds is the time the system output rate is defined over.
	seconds float64
}

// classInput is what a source knows about one class, or the mix.
type classInput struct {
	name  string
	arms  [2]armInput // A, B
	pairs PairCounts
	// diffs are TTFT(B) - TTFT(A) of the pairs both arms completed.
	diffs distribution
	// bFaster counts the pairs in which B's first token came first.
	bFaster int
	// keepUp judges keeping up on the steady-state window; nil when the
	// source judges on its query window.
	keepUp *KeepUpResult
}

// evidence is everything a source hands to build.
type evidence struct {
	source  string
	window  Window
	classes []classInput
	mixed   classInput
	// notMixedReplay gives reasons why the merged classes are not a mixed
	// replay, whatever production's mix.
	notMixedReplay []string
	// production counts production requests by class; nil when unknown.
	production map[string]float64
	// skippedShare is NaN when the source does not record skips.
	skippedShare float64
	definitions  []string
	warnings     []string
}

func build(ev evidence, o Options) *Report {
	r := &Report{
		Source:      ev.source,
		Window:      ev.window,
		Definitions: ev.definitions,
		Validity: Validity{
			CompletedParity:  true,
			TokenParity:      true,
			SkippedShare:     Float(ev.skippedShare),
			ClassMixDistance: Float(math.NaN()),
			Warnings:         slices.Clone(ev.warnings),
		},
	}
	for _, in := range ev.classes {
		c := compare(in, o)
		r.Classes = append(r.Classes, c)
		r.Validity.CompletedParity = r.Validity.CompletedParity && c.CompletedParity
		r.Validity.TokenParity = r.Validity.TokenParity && c.TokenParity
	}
	r.Mixed = compare(ev.mixed, o)

	mixReasons := slices.Clone(ev.notMixedReplay)
	mirrored := map[string]float64{}
	for _, c := range r.Classes {
		mirrored[c.Class] = float64(c.Pairs.total())
	}
	switch d := totalVariation(mirrored, ev.production); {
	case math.IsNaN(d):
		mixReasons = append(mixReasons, "there is no production traffic to check the mirrored class mix against")
	case d > o.MixTolerance:
		r.Validity.ClassMixDistance = Float(d)
		mixReasons = append(mixReasons, fmt.Sprintf("the mirrored class mix is %s away from production's (total variation distance, above %s)", percent(d), percent(o.MixTolerance)))
	default:
		r.Validity.ClassMixDistance = Float(d)
	}
	if len(mixReasons) > 0 {
		r.Mixed.TTFTP95Verdict, r.Mixed.OutputRateVerdict, r.Mixed.PerRequestSpeedVerdict = InsufficientData, InsufficientData, InsufficientData
		r.Mixed.OutputRateCase = ""
		r.Mixed.Withheld = strings.Join(mixReasons, "; ")
		r.Validity.Warnings = append(r.Validity.Warnings, "no claim for the mix: "+r.Mixed.Withheld)
	}
	if !math.IsNaN(ev.skippedShare) && ev.skippedShare > o.SkipTolerance {
		r.Validity.Warnings = append(r.Validity.Warnings, fmt.Sprintf("%s of sampled requests were skipped because an arm was at its in-flight limit", percent(ev.skippedShare)))
	}
	for _, c := range r.Classes {
		if c.Withheld != "" {
			r.Validity.Warnings = append(r.Validity.Warnings, c.Class+": "+c.Withheld)
		}
	}

	r.decide(ev, o, mirrored)
	r.Decision = strings.Join(r.decision, " ")
	r.Because = strings.Join(r.because, " ")
	r.WhatWouldChangeIt = strings.Join(r.change, " ")
	return r
}

// compare computes the figures and verdicts of one class.
func compare(in classInput, o Options) Class {
	c := Class{
		Class:                  in.name,
		Arms:                   map[string]Arm{},
		Pairs:                  in.pairs,
		TTFTP95Verdict:         InsufficientData,
		OutputRateVerdict:      InsufficientData,
		PerRequestSpeedVerdict: InsufficientData,
	}
	for i, name := range exporter.Arms {
		c.Arms[name] = arm(in.arms[i], in.keepUp, name)
	}
	a, b := in.arms[0], in.arms[1]
	c.TTFTP95DifferenceSeconds = c.Arms[exporter.ConfigB].TTFTP95Seconds - c.Arms[exporter.ConfigA].TTFTP95Seconds
	c.TTFTP95DifferenceCISeconds = difference(a.ttft, b.ttft, 0.95)
	c.OutputRateRatio = c.Arms[exporter.ConfigB].OutputTokensPerSecond / c.Arms[exporter.ConfigA].OutputTokensPerSecond
	c.SteadyOutputRateRatio = Float(math.NaN())
	rateCase := outputRateCase(float64(c.OutputRateRatio), o.RateTolerance)
	if k := in.keepUp; k != nil {
		c.SteadyOutputRateRatio = Float(k.Ratio())
		c.SteadyState = steadyState(*k)
		c.keepUp = k
		rateCase = k.Case
	}
	c.Paired = paired(in)

	p := in.pairs
	c.CompletedParity = p.total() > 0 && float64(p.AFailed+p.BFailed) <= o.ParityTolerance*float64(p.total())
	c.TokenParity = float64(p.TokenMismatches) <= o.ParityTolerance*float64(p.BothCompleted)
	switch {
	case p.BothCompleted < o.MinPairs:
		c.Withheld = fmt.Sprintf("only %d pairs completed on both arms, fewer than the %d needed", p.BothCompleted, o.MinPairs)
		return c
	case !c.CompletedParity:
		c.Withheld = fmt.Sprintf("the arms did not complete the same requests (A alone failed %d and B alone failed %d of %d pairs)", p.AFailed, p.BFailed, p.total())
		return c
	}
	c.TTFTP95Verdict = direction(c.TTFTP95DifferenceCISeconds, Faster, Slower)
	if c.TTFTP95Verdict != InsufficientData && small(c.Arms[exporter.ConfigA].TTFTP95Seconds, c.Arms[exporter.ConfigB].TTFTP95Seconds, o.MinEffect) {
		c.TTFTP95Verdict = NoDifference
	}
	if !c.TokenParity {
		c.Withheld = fmt.Sprintf("output token counts differ in %d of %d pairs, so output rate and per-request speed are not compared like for like", p.TokenMismatches, p.BothCompleted)
		return c
	}
	c.OutputRateCase = rateCase
	switch rateCase {
	case OutputRateTie:
		c.OutputRateVerdict = NoDifference
	case OutputRateAFellBehind:
		c.OutputRateVerdict = Higher
	case OutputRateBFellBehind:
		c.OutputRateVerdict = Lower
	}
	c.PerRequestSpeedVerdict = direction(difference(a.speed, b.speed, 0.5), Lower, Higher)
	if c.PerRequestSpeedVerdict != InsufficientData && small(c.Arms[exporter.ConfigA].PerRequestOutputTokensPerSecondP50, c.Arms[exporter.ConfigB].PerRequestOutputTokensPerSecondP50, o.MinEffect) {
		c.PerRequestSpeedVerdict = NoDifference
	}
	return c
}

// small reports whether b differs from a by less than the relative effect.
func small(a, b Float, effect float64) bool {
	return math.Abs(float64(b-a)) < effect*math.Abs(float64(a))
}

// outputRateCase reads the case of two output rates that share their
// window's edges from B's rate over A's; empty when the ratio is undefined.
func outputRateCase(ratio, tolerance float64) string {
	switch {
	case math.IsNaN(ratio) || math.IsInf(ratio, 0):
		return ""
	case math.Abs(ratio-1) <= tolerance:
		return OutputRateTie
	case ratio > 1:
		return OutputRateAFellBehind
	}
	return OutputRateBFellBehind
}

func steadyState(k KeepUpResult) *SteadyState {
	s := &SteadyState{
		Start:                        k.Window.Start,
		End:                          k.Window.End,
		WarmUpSeconds:                Float(k.WarmUp.Seconds()),
		Requests:                     map[string]int{},
		ArrivalOutputTokensPerSecond: map[string]Float{},
		EdgeNoise:                    Float(k.EdgeNoise),
		TooShort:                     k.TooShortReason(),
	}
	for config, a := range k.Arms {
		s.Requests[config] = a.Requests
		s.ArrivalOutputTokensPerSecond[config] = Float(a.ArrivalTokensPerSecond)
	}
	return s
}

// arm is the figures of one arm, named config, on one class; k, when not
// nil, holds its steady-state delivery.
func arm(in armInput, k *KeepUpResult, config string) Arm {
	q := func(d distribution, q float64) Float {
		if d == nil {
			return Float(math.NaN())
		}
		return Float(d.quantile(q))
	}
	ci := func(d distribution, q float64) Interval {
		if d == nil {
			return Interval{math.NaN(), math.NaN()}
		}
		return d.quantileCI(q, level)
	}
	steadyRate := Float(math.NaN())
	if k != nil {
		steadyRate = Float(k.Arms[config].OutputTokensPerSecond)
	}
	return Arm{
		Completed:                            in.completed,
		TTFTP50Seconds:                       q(in.ttft, 0.5),
		TTFTP50CISeconds:                     ci(in.ttft, 0.5),
		TTFTP95Seconds:                       q(in.ttft, 0.95),
		TTFTP95CISeconds:                     ci(in.ttft, 0.95),
		TTFTP99Seconds:                       q(in.ttft, 0.99),
		TTFTP99CISeconds:                     ci(in.ttft, 0.99),
		OutputTokens:                         Float(in.outputTokens),
		OutputTokensPerSecond:                Float(in.outputTokens / in.seconds),
		SteadyOutputTokensPerSecond:          steadyRate,
		PerRequestOutputTokensPerSecondP50:   q(in.speed, 0.5),
		PerRequestOutputTokensPerSecondP50CI: ci(in.speed, 0.5),
		ITLP50Seconds:                        q(in.itl, 0.5),
		ITLP95Seconds:                        q(in.itl, 0.95),
	}
}

// difference is a conservative interval of quantile(b) - quantile(a): each
// arm's order-statistic interval at the Bonferroni level, subtracted.
func difference(a, b distribution, q float64) Interval {
	if a == nil || b == nil {
		return Interval{math.NaN(), math.NaN()}
	}
	ca, cb := a.quantileCI(q, bonferroniLevel), b.quantileCI(q, bonferroniLevel)
	return Interval{cb[0] - ca[1], cb[1] - ca[0]}
}

// direction reads the verdict of an interval of B - A.
func direction(ci Interval, below, above string) string {
	switch {
	case !ci.bounded():
		return InsufficientData
	case ci[1] < 0:
		return below
	case ci[0] > 0:
		return above
	default:
		return NoDifference
	}
}

func paired(in classInput) Paired {
	p := Paired{
		BFasterShare:            Float(math.NaN()),
		BFasterShareCI:          Interval{math.NaN(), math.NaN()},
		MedianDifferenceSeconds: Float(math.NaN()),
	}
	if in.diffs == nil || in.diffs.count() == 0 {
		return p
	}
	p.Pairs = in.diffs.count()
	p.BFasterShare = Float(float64(in.bFaster) / float64(p.Pairs))
	p.BFasterShareCI = wilson(in.bFaster, p.Pairs, level)
	p.MedianDifferenceSeconds = Float(in.diffs.quantile(0.5))
	return p
}

// totalVariation is half the L1 distance between two count vectors, each
// normalised to shares.
func totalVariation(p, q map[string]float64) float64 {
	sum := func(m map[string]float64) float64 {
		t := 0.0
		for _, v := range m {
			t += v
		}
		return t
	}
	tp, tq := sum(p), sum(q)
	if tp == 0 || tq == 0 {
		return math.NaN()
	}
	keys := slices.Collect(maps.Keys(p))
	keys = append(keys, slices.Collect(maps.Keys(q))...)
	slices.Sort(keys)
	d := 0.0
	for _, k := range slices.Compact(keys) {
		d += math.Abs(p[k]/tp - q[k]/tq)
	}
	return d / 2
}
