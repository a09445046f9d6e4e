package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
)

// level is the confidence of every interval the report shows. A difference
// of two unpaired quantiles takes each arm's interval at bonferroniLevel,
// so the difference interval covers with at least level.
const (
	level           = verdict.Level
	bonferroniLevel = 1 - (1-level)/2
)

// ttftQuantiles are the TTFT quantiles the report compares.
var ttftQuantiles = []float64{0.5, 0.95, 0.99}

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
	// ttftPairs and speedPairs are TTFT and per-request output speed of
	// the pairs both arms completed; nil when the source has no pairs.
	ttftPairs, speedPairs *pairedSamples
	// seconds is the time the class's pairs arrived over, for the pair
	// rate.
	seconds float64
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
		// No production to compare with leaves the mix unjudged; a mirrored
		// mix known to differ from production's is not the mix to judge.
		v := Invalid
		if len(ev.notMixedReplay) == 0 && math.IsNaN(float64(r.Validity.ClassMixDistance)) {
			v = InsufficientData
		}
		r.Mixed.TTFTP95Verdict, r.Mixed.OutputRateVerdict, r.Mixed.PerRequestSpeedVerdict = v, v, v
		r.Mixed.PerRequestSpeed.Verdict = v
		for i := range r.Mixed.TTFT {
			r.Mixed.TTFT[i].Verdict, r.Mixed.TTFT[i].MorePairs, r.Mixed.TTFT[i].MoreSeconds = v, 0, 0
		}
		r.Mixed.OutputRateCase = ""
		r.mixReasons = mixReasons
		r.Mixed.Withheld = strings.Join(mixReasons, "; ")
		r.Validity.Warnings = append(r.Validity.Warnings, "no claim for the mix: "+strings.Join(mixReasons, "; "))
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
	c.TTFT = comparisons(in.ttftPairs, a.ttft, b.ttft, ttftQuantiles)
	c.PerRequestSpeed = comparisons(in.speedPairs, a.speed, b.speed, []float64{0.5})[0]
	p95 := c.TTFT[1]
	c.TTFTP95DifferenceSeconds, c.TTFTP95DifferenceCISeconds = p95.Difference, p95.DifferenceCI
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
	pairRate := float64(p.BothCompleted) / in.seconds
	c.pairRate = pairRate
	setAll := func(v string) {
		c.TTFTP95Verdict, c.PerRequestSpeed.Verdict, c.PerRequestSpeedVerdict = v, v, v
		for i := range c.TTFT {
			c.TTFT[i].Verdict = v
		}
	}
	setAll(InsufficientData)
	switch {
	case p.BothCompleted < o.MinPairs:
		c.Withheld = fmt.Sprintf("only %d pairs completed on both arms, fewer than the %d needed", p.BothCompleted, o.MinPairs)
		return c
	case !c.CompletedParity:
		c.Withheld = fmt.Sprintf("the arms did not complete the same requests (A alone failed %d and B alone failed %d of %d pairs)", p.AFailed, p.BFailed, p.total())
		setAll(Invalid)
		c.OutputRateVerdict = Invalid
		return c
	}
	for i := range c.TTFT {
		judge(&c.TTFT[i], verdict.Latency, o.Margin, p.BothCompleted, pairRate)
	}
	c.TTFTP95Verdict = c.TTFT[1].Verdict
	if !c.TokenParity {
		c.Withheld = fmt.Sprintf("output token counts differ in %d of %d pairs, so output rate and per-request speed are not compared like for like", p.TokenMismatches, p.BothCompleted)
		c.OutputRateVerdict, c.PerRequestSpeed.Verdict, c.PerRequestSpeedVerdict = Invalid, Invalid, Invalid
		return c
	}
	c.OutputRateCase = rateCase
	switch rateCase {
	case OutputRateTie:
		c.OutputRateVerdict = Equivalent
	case OutputRateTooShort:
		c.OutputRateVerdict = Inconclusive
	case OutputRateAFellBehind:
		c.OutputRateVerdict = Higher
	case OutputRateBFellBehind:
		c.OutputRateVerdict = Lower
	}
	judge(&c.PerRequestSpeed, verdict.Rate, o.Margin, p.BothCompleted, pairRate)
	c.PerRequestSpeedVerdict = c.PerRequestSpeed.Verdict
	return c
}

// comparisons compares B's quantiles qs with A's: by a bootstrap over pairs
// when the source has pairs, otherwise by subtracting each arm's interval.
func comparisons(pairs *pairedSamples, a, b distribution, qs []float64) []Comparison {
	out := make([]Comparison, len(qs))
	if pairs != nil && len(pairs.a) >= 2 {
		for i, d := range pairs.bootstrap(qs, level) {
			out[i] = Comparison{Quantile: Float(d.q), Difference: Float(d.diff), DifferenceCI: d.ci,
				Ratio: Float(d.ratio), RatioCI: d.ratioCI, Method: MethodPaired}
		}
	} else {
		for i, q := range qs {
			out[i] = Comparison{Quantile: Float(q), Method: MethodUnpaired,
				Difference: Float(math.NaN()), Ratio: Float(math.NaN()),
				DifferenceCI: difference(a, b, q), RatioCI: ratioInterval(a, b, q)}
			if a != nil && b != nil {
				qa, qb := a.quantile(q), b.quantile(q)
				out[i].Difference, out[i].Ratio = Float(qb-qa), Float(qb/qa)
			}
		}
	}
	for i, q := range qs {
		out[i].A, out[i].B = quantileOf(a, q), quantileOf(b, q)
		out[i].Verdict = InsufficientData
		out[i].MinimumDetectable = Float(minimumDetectable(out[i].DifferenceCI))
	}
	return out
}

func quantileOf(d distribution, q float64) Float {
	if d == nil {
		return Float(math.NaN())
	}
	return Float(d.quantile(q))
}

// judge reads c's verdict with the equivalence margin (a fraction of A's
// value) and, when it is inconclusive, how many more pairs would likely
// settle it and how long they take at pairRate pairs/s.
func judge(c *Comparison, read func(lo, hi, margin float64) string, margin float64, pairs int, pairRate float64) {
	c.Margin = Float(margin * math.Abs(float64(c.A)))
	c.Verdict = read(c.DifferenceCI[0], c.DifferenceCI[1], float64(c.Margin))
	if c.Verdict != Inconclusive {
		return
	}
	if n := morePairs(float64(c.Difference), c.DifferenceCI, float64(c.Margin), pairs); n > 0 {
		c.MorePairs = n
		if pairRate > 0 && !math.IsInf(pairRate, 0) {
			c.MoreSeconds = Float(float64(n) / pairRate)
		}
	}
}

// powerFactor turns the half-width of a 95% interval into the difference a
// run finds with 80% power: (z(0.975) + z(0.8)) / z(0.975).
var powerFactor = (normalQuantile(0.975) + normalQuantile(0.8)) / normalQuantile(0.975)

// minimumDetectable is the smallest difference, either way, that a run
// whose 95% interval is ci finds with 80% power.
func minimumDetectable(ci Interval) float64 {
	if !ci.bounded() {
		return math.NaN()
	}
	return powerFactor * (ci[1] - ci[0]) / 2
}

// morePairs is how many pairs beyond n an inconclusive comparison likely
// needs, the interval narrowing as 1/√pairs around the same estimate d:
// until it leaves out zero (a direction) or fits inside ±margin
// (equivalence), whichever comes first. Zero when neither can come.
func morePairs(d float64, ci Interval, margin float64, n int) int {
	half := (ci[1] - ci[0]) / 2
	if !(half > 0) || n <= 0 {
		return 0
	}
	need := math.Inf(1)
	if d != 0 {
		need = float64(n) * (half / math.Abs(d)) * (half / math.Abs(d))
	}
	if room := margin - math.Abs(d); room > 0 {
		need = min(need, float64(n)*(half/room)*(half/room))
	}
	if math.IsInf(need, 0) || need > 1e12 {
		return 0
	}
	return max(int(math.Ceil(need))-n, 1)
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

// ratioInterval is a conservative interval of quantile(b) / quantile(a)
// for positive quantities, from each arm's interval at the Bonferroni level.
func ratioInterval(a, b distribution, q float64) Interval {
	if a == nil || b == nil {
		return Interval{math.NaN(), math.NaN()}
	}
	ca, cb := a.quantileCI(q, bonferroniLevel), b.quantileCI(q, bonferroniLevel)
	hi := math.Inf(1)
	if ca[0] > 0 {
		hi = cb[1] / ca[0]
	}
	return Interval{cb[0] / ca[1], hi}
}

func paired(in classInput) Paired {
	p := Paired{
		BFasterShare:              Float(math.NaN()),
		BFasterShareCI:            Interval{math.NaN(), math.NaN()},
		MedianDifferenceSeconds:   Float(math.NaN()),
		MedianDifferenceCISeconds: Interval{math.NaN(), math.NaN()},
	}
	if in.diffs == nil || in.diffs.count() == 0 {
		return p
	}
	p.Pairs = in.diffs.count()
	p.BFasterShare = Float(float64(in.bFaster) / float64(p.Pairs))
	p.BFasterShareCI = wilson(in.bFaster, p.Pairs, level)
	p.MedianDifferenceSeconds = Float(in.diffs.quantile(0.5))
	p.MedianDifferenceCISeconds = in.diffs.quantileCI(0.5, level)
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
