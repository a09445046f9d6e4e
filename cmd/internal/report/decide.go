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
)

// decide writes the answer in short: a decision per class and for the mix,
// the checks it rests on, and the data that would change it.
func (r *Report) decide(ev evidence, o Options, mirrored map[string]float64) {
	r.because = append(r.because, "Each mirrored request went to A and B at the same moment, so within a class both arms saw the same requests at the same arrival times.")
	rateTie := false
	for _, c := range r.Classes {
		r.decision = append(r.decision, classSentence(c.Class, c, o))
		r.because = append(r.because, checks(c, o))
		switch {
		case c.Withheld != "" && c.Pairs.BothCompleted < o.MinPairs:
			r.change = append(r.change, fmt.Sprintf("%d more pairs of class %s.", o.MinPairs-c.Pairs.BothCompleted, c.Class))
		case !c.CompletedParity:
			r.change = append(r.change, fmt.Sprintf("A run of class %s in which both arms complete the same requests.", c.Class))
		case !c.TokenParity:
			r.change = append(r.change, fmt.Sprintf("Equal output token counts per pair in class %s (the same output limit and stop conditions on both arms).", c.Class))
		}
		if ci := c.TTFTP95DifferenceCISeconds; c.TTFTP95Verdict == NoDifference && ci.includesZero() {
			r.change = append(r.change, fmt.Sprintf("More pairs of class %s, to narrow the TTFT p95 difference interval (now %s to %s).", c.Class, signedSeconds(ci[0]), signedSeconds(ci[1])))
		}
		rateTie = rateTie || c.OutputRateVerdict == NoDifference
	}
	if rateTie {
		r.change = append(r.change, "A load at which one arm falls behind the arrivals, to support a capacity claim.")
	}
	for _, c := range r.Classes {
		if c.OutputRateCase == OutputRateTooShort {
			r.change = append(r.change, fmt.Sprintf("A longer run of class %s, whose steady-state window lasts at least %d warm-ups and holds %d completed requests per arm, to judge whether both arms kept up.", c.Class, minSteadyWarmUps, minSteadyRequests))
		}
	}

	r.decision = append(r.decision, r.mixedSentence(mirrored, o))
	if r.Mixed.Withheld == "" {
		r.because = append(r.because, fmt.Sprintf("The mirrored class mix is within %s of production's (total variation distance %s).", percent(o.MixTolerance), percent(float64(r.Validity.ClassMixDistance))))
	} else {
		r.because = append(r.because, "No claim is made for the mix: "+r.Mixed.Withheld+".")
		if len(ev.notMixedReplay) > 0 || !math.IsNaN(float64(r.Validity.ClassMixDistance)) {
			r.change = append(r.change, "A representative mixed replay: both arms on one trace with the classes interleaved in production's proportions, with individual timings.")
		} else {
			r.change = append(r.change, "Production traffic measured alongside the mirrored traffic, to check that the mirrored class mix is production's.")
		}
	}
	if s := float64(r.Validity.SkippedShare); math.IsNaN(s) {
		r.because = append(r.because, "Overload skips are not in per-request records; the Prometheus source reports their share.")
	} else {
		r.because = append(r.because, fmt.Sprintf("%s of sampled requests were skipped because an arm was at its in-flight limit.", percent(s)))
		if s > o.SkipTolerance {
			r.change = append(r.change, "Fewer overload skips (a higher in-flight limit or a lower sample rate), so the arms see the sampled load.")
		}
	}
	r.because = append(r.because, "Quantiles of the mix come from the merged distribution of all its requests; p95s are never averaged.")
	if len(r.change) == 0 {
		r.change = append(r.change, "Nothing for these classes and this mix; a claim about another traffic mix needs a replay of that mix.")
	}
}

func displayName(class string) string {
	if class == MixedClass {
		return "All traffic"
	}
	return class
}

// classSentence states the verdicts of one class, or why there are none.
func classSentence(name string, c Class, o Options) string {
	a, b := c.Arms[exporter.ConfigA], c.Arms[exporter.ConfigB]
	var parts []string
	if p := rateClause(c, o.RateTolerance); p != "" {
		parts = append(parts, p)
	}
	d, ci := float64(c.TTFTP95DifferenceSeconds), c.TTFTP95DifferenceCISeconds
	switch c.TTFTP95Verdict {
	case Slower:
		parts = append(parts, fmt.Sprintf("TTFT p95 is %s worse (%s vs %s; 95%% CI of B - A %s to %s)", seconds(d), seconds(float64(b.TTFTP95Seconds)), seconds(float64(a.TTFTP95Seconds)), signedSeconds(ci[0]), signedSeconds(ci[1])))
	case Faster:
		parts = append(parts, fmt.Sprintf("TTFT p95 is %s better (%s vs %s; 95%% CI of B - A %s to %s)", seconds(-d), seconds(float64(b.TTFTP95Seconds)), seconds(float64(a.TTFTP95Seconds)), signedSeconds(ci[0]), signedSeconds(ci[1])))
	case NoDifference:
		if !ci.includesZero() {
			parts = append(parts, fmt.Sprintf("TTFT p95 differs by less than the %s minimum effect (%s vs %s; 95%% CI of B - A %s to %s)", percent(o.MinEffect), seconds(float64(b.TTFTP95Seconds)), seconds(float64(a.TTFTP95Seconds)), signedSeconds(ci[0]), signedSeconds(ci[1])))
			break
		}
		parts = append(parts, fmt.Sprintf("TTFT p95 shows no difference (%s vs %s; the 95%% CI of B - A, %s to %s, includes zero)", seconds(float64(b.TTFTP95Seconds)), seconds(float64(a.TTFTP95Seconds)), signedSeconds(ci[0]), signedSeconds(ci[1])))
	}
	switch c.PerRequestSpeedVerdict {
	case Higher, Lower:
		parts = append(parts, fmt.Sprintf("per-request output speed p50 is %s (%s vs %s tokens/s)", c.PerRequestSpeedVerdict, rate(b.PerRequestOutputTokensPerSecondP50), rate(a.PerRequestOutputTokensPerSecondP50)))
	case NoDifference:
		parts = append(parts, fmt.Sprintf("per-request output speed p50 shows no difference (%s vs %s tokens/s)", rate(b.PerRequestOutputTokensPerSecondP50), rate(a.PerRequestOutputTokensPerSecondP50)))
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

// crossClass names, for each measure, the verdict every class with data
// shares, or how the classes disagree.
var crossClass = []struct {
	measure string
	verdict func(Class) string
	agree   map[string]string
}{
	{"system output rate", func(c Class) string { return c.OutputRateVerdict },
		map[string]string{Higher: "B raised the system output rate", Lower: "B lowered the system output rate", NoDifference: "system output rates tied"}},
	{"TTFT p95", func(c Class) string { return c.TTFTP95Verdict },
		map[string]string{Faster: "B's TTFT p95 improved", Slower: "B's TTFT p95 got worse", NoDifference: "TTFT p95 showed no difference"}},
	{"per-request output speed p50", func(c Class) string { return c.PerRequestSpeedVerdict },
		map[string]string{Higher: "B's per-request output speed was higher", Lower: "B's per-request output speed was lower", NoDifference: "per-request output speed showed no difference"}},
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
			if v := m.verdict(c); v != InsufficientData {
				with = append(with, v+" on "+c.Class)
				verdicts[v] = true
			}
		}
		switch {
		case len(verdicts) > 1:
			disagree = append(disagree, fmt.Sprintf("%s changes direction between classes (%s), so no single %s claim covers all traffic", m.measure, strings.Join(with, ", "), m.measure))
		case len(verdicts) == 1 && len(with) == len(r.Classes) && len(with) > 1:
			for v := range verdicts {
				agree = append(agree, m.agree[v]+" in every class")
			}
		}
	}
	if r.Mixed.Withheld == "" {
		s := classSentence(MixedClass, r.Mixed, o)
		s = "For the observed traffic mix (" + mixShares(mirrored) + ")" + strings.TrimPrefix(s, displayName(MixedClass))
		if len(disagree) > 0 {
			s += " This holds for this mix only: " + strings.Join(disagree, "; ") + "."
		}
		return s
	}
	parts := append(agree, disagree...)
	if len(parts) == 0 {
		return "All traffic: no claim, because " + r.Mixed.Withheld + "."
	}
	return "All traffic: " + strings.Join(parts, "; ") + ". The merged figures carry no claim of their own, because " + r.Mixed.Withheld + "."
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
