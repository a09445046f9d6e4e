package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
)

// decide writes the answer in short: a line per class and for the mix, a
// decision per class and for the mix, the checks it rests on, and the data
// that would change it.
func (r *Report) decide(ev evidence, o Options, mirrored map[string]float64) {
	width := 0
	for _, c := range r.allClasses() {
		width = max(width, len(c.Class))
	}
	for _, c := range r.allClasses() {
		r.Answer = append(r.Answer, answerLine(c, width, o, c.Class == MixedClass && len(r.mixReasons) > 0))
	}
	r.Because = append(r.Because, "Each mirrored request went to A and B at the same moment, so within a class both arms saw the same requests at the same arrival times.")
	rateTie := false
	for _, c := range r.Classes {
		r.Decision = append(r.Decision, classSentence(c.Class, c, o))
		r.Because = append(r.Because, checks(c, o))
		switch {
		case c.Withheld != "" && c.Pairs.BothCompleted < o.MinPairs:
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, fmt.Sprintf("%d more pairs of class %s%s.", o.MinPairs-c.Pairs.BothCompleted, c.Class, atTodaysRate(o.MinPairs-c.Pairs.BothCompleted, c)))
		case !c.CompletedParity:
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, fmt.Sprintf("A run of class %s in which both arms complete the same requests.", c.Class))
		case !c.TokenParity:
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, fmt.Sprintf("Equal output token counts per pair in class %s (the same output limit and stop conditions on both arms).", c.Class))
		}
		if s := moreEvidence(c, "TTFT p95", c.TTFT[1], seconds); s != "" {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, s)
		}
		if s := moreEvidence(c, "per-request output speed p50", c.PerRequestSpeed, tokensPerSecond); s != "" {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, s)
		}
		rateTie = rateTie || c.OutputRateVerdict == Equivalent
	}
	if rateTie {
		r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, "A load at which one arm falls behind the arrivals, to support a capacity claim.")
	}
	for _, c := range r.Classes {
		if c.OutputRateCase == OutputRateTooShort {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, fmt.Sprintf("A longer run of class %s, whose steady-state window lasts at least %d warm-ups and holds %d completed requests per arm, to judge whether both arms kept up.", c.Class, minSteadyWarmUps, minSteadyRequests))
		}
	}

	r.Decision = append(r.Decision, r.mixedSentence(mirrored, o))
	if len(r.mixReasons) == 0 {
		r.Because = append(r.Because, fmt.Sprintf("The mirrored class mix is within %s of production's (total variation distance %s).", percent(o.MixTolerance), percent(float64(r.Validity.ClassMixDistance))))
		if s := moreEvidence(r.Mixed, "TTFT p95", r.Mixed.TTFT[1], seconds); s != "" {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, s)
		}
	} else {
		r.Because = append(r.Because, "No claim is made for the mix: "+strings.Join(r.mixReasons, "; ")+".")
		if len(ev.notMixedReplay) > 0 || !math.IsNaN(float64(r.Validity.ClassMixDistance)) {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, "A representative mixed replay: both arms on one trace with the classes interleaved in production's proportions, with individual timings.")
		} else {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, "Production traffic measured alongside the mirrored traffic, to check that the mirrored class mix is production's.")
		}
	}
	if s := float64(r.Validity.SkippedShare); math.IsNaN(s) {
		r.Because = append(r.Because, "The share of sampled requests skipped for overload is unknown: these records predate it (the Prometheus source reports it).")
	} else {
		r.Because = append(r.Because, fmt.Sprintf("%s of sampled requests were skipped because an arm was at its in-flight limit.", percent(s)))
		if s > o.SkipTolerance {
			r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, "Fewer overload skips (a higher in-flight limit or a lower sample rate), so the arms see the sampled load.")
		}
	}
	r.Because = append(r.Because, "Quantiles of the mix come from the merged distribution of all its requests; p95s are never averaged.")
	if len(r.WhatWouldChangeIt) == 0 {
		r.WhatWouldChangeIt = append(r.WhatWouldChangeIt, "Nothing for these classes and this mix; a claim about another traffic mix needs a replay of that mix.")
	}
}

// answerLine is the TTFT p95 verdict of one class in one line, naming
// which figure is A's and which is B's.
func answerLine(c Class, width int, o Options, notTheMix bool) string {
	p95 := c.TTFT[1]
	a, b := seconds(float64(p95.A)), seconds(float64(p95.B))
	rel := relative(p95)
	var s string
	switch p95.Verdict {
	case Slower, Faster:
		s = fmt.Sprintf("B %s: %s vs A %s, %s", p95.Verdict, b, a, rel)
	case Equivalent:
		s = fmt.Sprintf("B equivalent (within ±%s of A): %s vs A %s, %s", percent(o.Margin), b, a, rel)
	case Inconclusive:
		s = fmt.Sprintf("inconclusive: B %s vs A %s, %s; smallest detectable change ±%s", b, a, rel, seconds(float64(p95.MinimumDetectable)))
	case InsufficientData:
		why := fmt.Sprintf("%d pairs, %d needed", c.Pairs.BothCompleted, o.MinPairs)
		if notTheMix {
			why = "no production traffic to check the mix against"
		}
		s = fmt.Sprintf("insufficient data: B %s vs A %s, %s", b, a, why)
	case Invalid:
		why := "the arms completed different requests"
		if notTheMix {
			why = "not a representative mixed replay"
		}
		s = fmt.Sprintf("invalid: B %s vs A %s, %s", b, a, why)
	}
	return fmt.Sprintf("%-*s  TTFT p95  %s", width, c.Class, s)
}

// relative is B's value over A's as a signed change with its interval.
func relative(c Comparison) string {
	r, ci := float64(c.Ratio), c.RatioCI
	if math.IsNaN(r) {
		return "n/a"
	}
	if !ci.bounded() {
		return signedPercent(r - 1)
	}
	return fmt.Sprintf("%s [%s, %s]", signedPercent(r-1), signedPercent(ci[0]-1), signedPercent(ci[1]-1))
}

func tokensPerSecond(x float64) string { return rate(Float(x)) + " tokens/s" }

// moreEvidence says, for an inconclusive comparison, what this run could
// detect and how many more pairs would likely settle it.
func moreEvidence(c Class, measure string, cmp Comparison, unit func(float64) string) string {
	if cmp.Verdict != Inconclusive {
		return ""
	}
	ci := cmp.DifferenceCI
	s := fmt.Sprintf("Class %s, %s (inconclusive: B - A %s, 95%% CI %s to %s, margin ±%s): this run could detect a change of ±%s (%s of A's %s) or more",
		c.Class, measure, signed(unit, float64(cmp.Difference)), signed(unit, ci[0]), signed(unit, ci[1]), unit(float64(cmp.Margin)),
		unit(float64(cmp.MinimumDetectable)), percent(float64(cmp.MinimumDetectable)/float64(cmp.A)), unit(float64(cmp.A)))
	if cmp.MorePairs == 0 {
		return s + "; more pairs alone would likely not settle it."
	}
	return s + fmt.Sprintf("; about %d more pairs%s would likely settle it.", cmp.MorePairs, atTodaysRate(cmp.MorePairs, c))
}

func signed(unit func(float64) string, x float64) string {
	if x > 0 {
		return "+" + unit(x)
	}
	return unit(x)
}

// atTodaysRate says how long n more pairs of c take at its pair rate.
func atTodaysRate(n int, c Class) string {
	if !(c.pairRate > 0) || math.IsInf(c.pairRate, 0) {
		return ""
	}
	return fmt.Sprintf(" (at today's %s pairs/s, about %s)", significant(c.pairRate, 3), time.Duration(float64(n)/c.pairRate*float64(time.Second)).Round(time.Second))
}

func displayName(class string) string {
	if class == MixedClass {
		return "All traffic"
	}
	return class
}

// classSentence states the verdicts of one class, or why there are none.
func classSentence(name string, c Class, o Options) string {
	var parts []string
	if p := rateClause(c, o.RateTolerance); p != "" {
		parts = append(parts, p)
	}
	p95 := c.TTFT[1]
	figures := fmt.Sprintf("B %s vs A %s; %s", seconds(float64(p95.B)), seconds(float64(p95.A)), intervalText(p95, seconds))
	switch p95.Verdict {
	case Slower:
		parts = append(parts, fmt.Sprintf("B's TTFT p95 is slower by %s (%s)", seconds(float64(p95.Difference)), figures))
	case Faster:
		parts = append(parts, fmt.Sprintf("B's TTFT p95 is faster by %s (%s)", seconds(-float64(p95.Difference)), figures))
	case Equivalent:
		parts = append(parts, fmt.Sprintf("TTFT p95 is equivalent (%s, inside the ±%s margin, %s of A's)", figures, seconds(float64(p95.Margin)), percent(o.Margin)))
	case Inconclusive:
		parts = append(parts, fmt.Sprintf("TTFT p95 is inconclusive (%s, which leaves the ±%s margin, %s of A's, and holds zero; the smallest change this run could detect is ±%s)", figures, seconds(float64(p95.Margin)), percent(o.Margin), seconds(float64(p95.MinimumDetectable))))
	}
	sp := c.PerRequestSpeed
	speedFigures := fmt.Sprintf("B %s vs A %s tokens/s", rate(sp.B), rate(sp.A))
	switch sp.Verdict {
	case Higher, Lower:
		parts = append(parts, fmt.Sprintf("B's per-request output speed p50 is %s (%s)", sp.Verdict, speedFigures))
	case Equivalent:
		parts = append(parts, fmt.Sprintf("per-request output speed p50 is equivalent (%s, inside the ±%s margin)", speedFigures, percent(o.Margin)))
	case Inconclusive:
		parts = append(parts, fmt.Sprintf("per-request output speed p50 is inconclusive (%s)", speedFigures))
	}
	s := displayName(name) + ": "
	switch {
	case len(parts) == 0:
		return s + "no claim, because " + c.Withheld + "."
	case c.Withheld != "":
		return s + strings.Join(parts, "; ") + "; no other claim, because " + c.Withheld + "."
	}
	return s + strings.Join(parts, "; ") + "."
}

// rateClause states the output rate comparison of one class: the system
// output rates as defined, and the rates the keeping-up judgement compares.
func rateClause(c Class, tolerance float64) string {
	a, b := c.Arms[exporter.ConfigA], c.Arms[exporter.ConfigB]
	system := fmt.Sprintf("%s vs %s tokens/s", rate(b.OutputTokensPerSecond), rate(a.OutputTokensPerSecond))
	judged := "over the same query window"
	if c.SteadyState != nil {
		judged = fmt.Sprintf("steady-state rates %s vs %s tokens/s", rate(b.SteadyOutputTokensPerSecond), rate(a.SteadyOutputTokensPerSecond))
	}
	switch c.OutputRateCase {
	case OutputRateAFellBehind:
		return fmt.Sprintf("B raised the system output rate (%s, %s; %s: A fell behind the arrivals)", system, signedPercent(float64(c.OutputRateRatio)-1), judged)
	case OutputRateBFellBehind:
		return fmt.Sprintf("B lowered the system output rate (%s, %s; %s: B fell behind the arrivals)", system, signedPercent(float64(c.OutputRateRatio)-1), judged)
	case OutputRateTie:
		if c.SteadyState == nil {
			return fmt.Sprintf("system output rates tie over the query window (%s): both arms kept up with the same arrivals, so no capacity claim can be made", system)
		}
		if math.Abs(float64(c.SteadyOutputRateRatio)-1) > tolerance {
			return fmt.Sprintf("both arms kept up in the steady state (%s, the lower still at the arrival side's rate; system output rates %s from first request start to last response end, which holds each arm's ramp-up and drain), so no capacity claim can be made", judged, system)
		}
		return fmt.Sprintf("system output rates tie in the steady state (%s; %s from first request start to last response end, which holds each arm's ramp-up and drain): both arms kept up with the same arrivals, so no capacity claim can be made", judged, system)
	case OutputRateTooShort:
		return fmt.Sprintf("the run is too short to judge capacity (system output rates %s from first request start to last response end, which holds each arm's ramp-up and drain; %s)", system, c.SteadyState.TooShort)
	}
	return ""
}

// intervalText states the 95% interval of B - A of c and how it was made.
func intervalText(c Comparison, unit func(float64) string) string {
	how := "95% paired CI of B - A"
	if c.Method == MethodUnpaired {
		how = "95% CI of B - A from unpaired histograms"
	}
	return fmt.Sprintf("%s %s to %s", how, signed(unit, c.DifferenceCI[0]), signed(unit, c.DifferenceCI[1]))
}

// crossClass names, for each measure, the verdict every class with data
// shares, or how the classes disagree.
var crossClass = []struct {
	measure string
	verdict func(Class) string
	agree   map[string]string
}{
	{"system output rate", func(c Class) string { return c.OutputRateVerdict },
		map[string]string{Higher: "B raised the system output rate", Lower: "B lowered the system output rate", Equivalent: "system output rates tied"}},
	{"TTFT p95", func(c Class) string { return c.TTFTP95Verdict },
		map[string]string{Faster: "B's TTFT p95 was faster", Slower: "B's TTFT p95 was slower", Equivalent: "TTFT p95 was equivalent"}},
	{"per-request output speed p50", func(c Class) string { return c.PerRequestSpeedVerdict },
		map[string]string{Higher: "B's per-request output speed was higher", Lower: "B's per-request output speed was lower", Equivalent: "per-request output speed was equivalent"}},
}

// mixedSentence states the claim for all traffic: from the merged
// distribution when the mirrored mix is a representative mixed replay, and
// never a single claim across classes that disagree.
func (r *Report) mixedSentence(mirrored map[string]float64, o Options) string {
	var agree, disagree []string
	for _, m := range crossClass {
		var with []string
		verdicts := map[string]bool{}
		for _, c := range r.Classes {
			if v := m.verdict(c); verdict.Conclusive(v) {
				with = append(with, v+" on "+c.Class)
				verdicts[v] = true
			}
		}
		switch {
		case len(verdicts) > 1:
			how := "differs between classes"
			if (verdicts[Faster] && verdicts[Slower]) || (verdicts[Higher] && verdicts[Lower]) {
				how = "changes direction between classes"
			}
			disagree = append(disagree, fmt.Sprintf("%s %s (%s), so no single %s claim covers all traffic", m.measure, how, strings.Join(with, ", "), m.measure))
		case len(verdicts) == 1 && len(with) == len(r.Classes) && len(with) > 1:
			for v := range verdicts {
				agree = append(agree, m.agree[v]+" in every class")
			}
		}
	}
	if len(r.mixReasons) == 0 {
		s := classSentence(MixedClass, r.Mixed, o)
		s = "For the observed traffic mix (" + mixShares(mirrored) + ")" + strings.TrimPrefix(s, displayName(MixedClass))
		if len(disagree) > 0 {
			s += " This holds for this mix only: " + strings.Join(disagree, "; ") + "."
		}
		return s
	}
	parts := append(agree, disagree...)
	why := strings.Join(r.mixReasons, "; ")
	if len(parts) == 0 {
		return "All traffic: no claim, because " + why + "."
	}
	return "All traffic: " + strings.Join(parts, "; ") + ". The merged figures carry no claim of their own, because " + why + "."
}

func mixShares(counts map[string]float64) string {
	total := 0.0
	for _, v := range counts {
		total += v
	}
	var parts []string
	for _, k := range classOrder(slices.Collect(maps.Keys(counts))) {
		parts = append(parts, fmt.Sprintf("%s %s", k, percent(counts[k]/total)))
	}
	return strings.Join(parts, ", ")
}

// checks states the validity checks of one class.
func checks(c Class, o Options) string {
	p := c.Pairs
	var s []string
	s = append(s, fmt.Sprintf("%d pairs, %d completed on both arms", p.total(), p.BothCompleted))
	if p.BothCompleted < o.MinPairs {
		s = append(s, fmt.Sprintf("fewer than the %d pairs needed", o.MinPairs))
	}
	if c.CompletedParity {
		s = append(s, "completed parity holds")
	} else {
		s = append(s, fmt.Sprintf("completed parity fails (A alone failed %d, B alone failed %d)", p.AFailed, p.BFailed))
	}
	if c.TokenParity {
		s = append(s, fmt.Sprintf("token parity holds (%d output-token mismatches)", p.TokenMismatches))
	} else {
		s = append(s, fmt.Sprintf("token parity fails (%d output-token mismatches)", p.TokenMismatches))
	}
	if r := rateCheck(c, o); r != "" {
		s = append(s, r)
	}
	return c.Class + ": " + strings.Join(s, "; ") + "."
}

// rateCheck states what the keeping-up judgement of one class compared.
func rateCheck(c Class, o Options) string {
	judged, ratio := "output rates over the same query window", float64(c.OutputRateRatio)
	if st := c.SteadyState; st != nil {
		judged = fmt.Sprintf("steady-state output rates (%s window from %s to %s, after a warm-up of %s)",
			seconds(st.End.Sub(st.Start).Seconds()), st.Start.Format(time.RFC3339), st.End.Format(time.RFC3339), seconds(float64(st.WarmUpSeconds)))
		ratio = float64(c.SteadyOutputRateRatio)
	}
	switch c.OutputRateCase {
	case OutputRateTie:
		if st := c.SteadyState; st != nil && math.Abs(ratio-1) > o.RateTolerance {
			lower := exporter.ConfigA
			if ratio < 1 {
				lower = exporter.ConfigB
			}
			return fmt.Sprintf("%s differ by %s, yet %s, the lower, delivered the arrival side's %s tokens/s within %s: both arms kept up (the other drained a backlog built before the window), so no capacity claim can be made; per-request speed still separates them",
				judged, percent(math.Abs(ratio-1)), lower, rate(st.ArrivalOutputTokensPerSecond[lower]), percent(o.RateTolerance))
		}
		return fmt.Sprintf("%s tie within %s: both arms kept up, so no capacity claim can be made; per-request speed still separates them", judged, percent(o.RateTolerance))
	case OutputRateAFellBehind, OutputRateBFellBehind:
		behind := exporter.ConfigA
		if c.OutputRateCase == OutputRateBFellBehind {
			behind = exporter.ConfigB
		}
		noise := ""
		if st := c.SteadyState; st != nil {
			noise = fmt.Sprintf(" and the %s the window's edges can make by chance", percent(float64(st.EdgeNoise)))
		}
		return fmt.Sprintf("%s differ by %s, beyond the %s tie tolerance%s: %s fell behind (its backlog grew), a capacity difference at this load", judged, percent(math.Abs(ratio-1)), percent(o.RateTolerance), noise, behind)
	case OutputRateTooShort:
		return "output rates not judged, because " + c.SteadyState.TooShort
	}
	return ""
}

func percent(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func signedPercent(x float64) string { return fmt.Sprintf("%+.1f%%", 100*x) }

func rate(x Float) string {
	v := float64(x)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return significant(v, 3)
}

// seconds formats a duration given in seconds to three significant digits.
func seconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "n/a"
	case math.IsInf(s, 1):
		return "∞"
	case math.IsInf(s, -1):
		return "-∞"
	case math.Abs(s) >= 1:
		return significant(s, 3) + " s"
	}
	return significant(s*1000, 3) + " ms"
}

// significant formats x rounded to n significant digits, without trailing
// zeros.
func significant(x float64, n int) string {
	if x == 0 {
		return "0"
	}
	scale := math.Pow(10, float64(n-1)-math.Floor(math.Log10(math.Abs(x))))
	return strconv.FormatFloat(math.Round(x*scale)/scale, 'f', -1, 64)
}

func signedSeconds(s float64) string {
	if s > 0 && !math.IsInf(s, 1) {
		return "+" + seconds(s)
	}
	return seconds(s)
}
