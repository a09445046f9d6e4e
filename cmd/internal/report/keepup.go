package report

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
)

// Output rate cases: whether both arms kept up with the same arrivals.
const (
	// OutputRateTie: both arms delivered the same output rate in the steady
	// state, so both kept up and the load says nothing about capacity.
	OutputRateTie = "tie"
	// OutputRateAFellBehind: A delivered less in the steady state; its
	// backlog grew.
	OutputRateAFellBehind = "a_fell_behind"
	// OutputRateBFellBehind: B delivered less in the steady state; its
	// backlog grew.
	OutputRateBFellBehind = "b_fell_behind"
	// OutputRateTooShort: the run has no steady state long enough to judge.
	OutputRateTooShort = "too_short"
)

// A steady-state window too short to judge capacity lasts less than
// minSteadyWarmUps warm-ups or holds fewer than minSteadyRequests completed
// requests of an arm.
const (
	minSteadyWarmUps  = 2
	minSteadyRequests = 30
)

// KeepUpResult judges whether A and B kept up with the same arrivals.
type KeepUpResult struct {
	// Case is OutputRateTie, OutputRateAFellBehind, OutputRateBFellBehind
	// or OutputRateTooShort.
	Case string
	// Window is the steady-state window common to both arms: from the
	// first request start plus WarmUp to the last request start. It is
	// empty (End not after Start) when the run has no steady state.
	Window Window
	// WarmUp is the larger of the two arms' p95 durations of completed
	// requests: streams started before Window.Start are past their ramp-up.
	WarmUp time.Duration
	// Arms holds each arm's figures over Window, by exporter.ConfigA and
	// exporter.ConfigB.
	Arms map[string]SteadyArm
	// EdgeNoise is how far, relative to A's steady-state rate, B's can lie
	// from it by chance when both kept up: two standard deviations of the
	// difference that the requests straddling the window's edges make,
	// estimated from each request's delivered tokens inside the window on
	// B minus on A (shot noise of the arrivals). NaN without a window.
	EdgeNoise float64
}

// SteadyArm is one arm's delivery over the steady-state window.
type SteadyArm struct {
	// Requests counts the completed requests started in the window.
	Requests int
	// OutputTokensPerSecond is the steady-state output rate: each completed
	// request's output tokens spread evenly from its first to its last
	// output frame, the part inside the window, over the window's length.
	OutputTokensPerSecond float64
	// ArrivalTokensPerSecond is the arrival-side reference: output tokens of
	// the completed requests started in the window over its length. An arm
	// that kept up delivers at about this rate.
	ArrivalTokensPerSecond float64
}

// Ratio is B's steady-state output rate over A's.
func (k KeepUpResult) Ratio() float64 {
	return k.Arms[exporter.ConfigB].OutputTokensPerSecond / k.Arms[exporter.ConfigA].OutputTokensPerSecond
}

// Seconds is the length of the steady-state window, zero when it is empty.
func (k KeepUpResult) Seconds() float64 { return max(k.Window.End.Sub(k.Window.Start).Seconds(), 0) }

// TooShortReason says why the window cannot judge capacity, empty when it
// can.
func (k KeepUpResult) TooShortReason() string {
	if k.Case != OutputRateTooShort {
		return ""
	}
	if k.Window == (Window{}) {
		return "A or B has no requests"
	}
	warmUp := k.WarmUp.Seconds()
	if s := k.Seconds(); s < minSteadyWarmUps*warmUp || s == 0 {
		return fmt.Sprintf("the steady-state window (from the first request start plus a warm-up of %s, the larger p95 request duration, to the last request start) lasts %s, less than %d warm-ups",
			seconds(warmUp), seconds(s), minSteadyWarmUps)
	}
	a, b := k.Arms[exporter.ConfigA].Requests, k.Arms[exporter.ConfigB].Requests
	if a < minSteadyRequests || b < minSteadyRequests {
		return fmt.Sprintf("the steady-state window holds %d completed requests of A and %d of B, fewer than the %d needed per arm", a, b, minSteadyRequests)
	}
	if r := k.Ratio(); math.IsNaN(r) || math.IsInf(r, 0) {
		return "an arm delivered no output tokens in the steady-state window"
	}
	return fmt.Sprintf("the steady-state rates differ by %s, within the %s that the requests straddling the window's edges can make by chance", signedPercent(k.Ratio()-1), percent(k.EdgeNoise))
}

// KeepUp judges, from the records of one class or of the mix, whether both
// arms kept up with the same arrivals. In a finite run the arm with slower
// streams takes longer to ramp up and to drain, which lowers its output rate
// from first start to last end even when its backlog never grew; so the
// judgement compares the rates delivered in the steady-state window. Rates
// within tolerance (relative to A's) tie: both kept up, no capacity claim.
// So do rates further apart when the lower one still matches the arrival
// side (within tolerance): the other arm drained a backlog. Otherwise the
// lower arm fell behind, a capacity claim made only when the difference also
// exceeds EdgeNoise; when it does not, the window is too short to tell.
// Records of other configs are ignored; A and B records of one mirrored
// request are joined by pair ID.
func KeepUp(recs []record.Record, tolerance float64) KeepUpResult {
	var arms [2][]record.Record
	for _, r := range recs {
		if side := slices.Index(exporter.Arms, r.Config); side >= 0 {
			arms[side] = append(arms[side], r)
		}
	}
	k := KeepUpResult{Case: OutputRateTooShort, Arms: map[string]SteadyArm{}, EdgeNoise: math.NaN()}
	if len(arms[0]) == 0 || len(arms[1]) == 0 {
		for _, config := range exporter.Arms {
			k.Arms[config] = SteadyArm{OutputTokensPerSecond: math.NaN(), ArrivalTokensPerSecond: math.NaN()}
		}
		return k
	}
	var firsts, lasts [2]time.Time
	for side, rs := range arms {
		firsts[side], lasts[side] = startRange(rs)
		k.WarmUp = max(k.WarmUp, p95Duration(rs))
	}
	k.Window.Start = latest(firsts[0], firsts[1]).Add(k.WarmUp)
	k.Window.End = earliest(lasts[0], lasts[1])

	length := k.Seconds()
	enough := length > 0 && length >= minSteadyWarmUps*k.WarmUp.Seconds()
	for side, config := range exporter.Arms {
		a := steady(arms[side], k.Window)
		enough = enough && a.Requests >= minSteadyRequests
		k.Arms[config] = a
	}
	if !enough {
		return k
	}
	k.EdgeNoise = edgeNoise(arms, k.Window) / k.Arms[exporter.ConfigA].OutputTokensPerSecond
	switch c := outputRateCase(k.Ratio(), tolerance); {
	case c == OutputRateTie:
		k.Case = c
	case c == "":
	case k.lowerKeptUpWithArrivals(tolerance):
		k.Case = OutputRateTie
	case math.Abs(k.Ratio()-1) > k.EdgeNoise:
		k.Case = c
	}
	return k
}

// lowerKeptUpWithArrivals reports whether the arm with the lower
// steady-state rate still delivered the arrivals' rate within tolerance:
// the other arm only drained more of a backlog built before the window.
func (k KeepUpResult) lowerKeptUpWithArrivals(tolerance float64) bool {
	lower := k.Arms[exporter.ConfigA]
	if k.Ratio() < 1 {
		lower = k.Arms[exporter.ConfigB]
	}
	return lower.OutputTokensPerSecond >= (1-tolerance)*lower.ArrivalTokensPerSecond
}

// edgeNoise is two standard deviations of B's minus A's tokens per second
// delivered in w when both kept up. Only requests that straddle an edge of
// w on one arm differ; by Campbell's theorem for Poisson arrivals the
// variance of the sum is estimated by the sum of the squared per-request
// differences.
func edgeNoise(arms [2][]record.Record, w Window) float64 {
	diff := map[string]float64{}
	for side, recs := range arms {
		sign := float64(2*side - 1)
		for i, r := range recs {
			if r.Outcome != exporter.OutcomeCompleted {
				continue
			}
			id := r.PairID
			if id == "" {
				id = fmt.Sprintf("unpaired %d %d", side, i)
			}
			diff[id] += sign * float64(r.OutputTokens) * shareInside(outputSpan(r), w)
		}
	}
	variance := 0.0
	for _, d := range diff {
		variance += d * d
	}
	return 2 * math.Sqrt(variance) / w.End.Sub(w.Start).Seconds()
}

// steady is one arm's delivery over w.
func steady(recs []record.Record, w Window) SteadyArm {
	length := w.End.Sub(w.Start).Seconds()
	if length <= 0 {
		return SteadyArm{OutputTokensPerSecond: math.NaN(), ArrivalTokensPerSecond: math.NaN()}
	}
	var a SteadyArm
	var delivered, arrived float64
	for _, r := range recs {
		if r.Outcome != exporter.OutcomeCompleted {
			continue
		}
		if !r.Start.Before(w.Start) && !r.Start.After(w.End) {
			a.Requests++
			arrived += float64(r.OutputTokens)
		}
		delivered += float64(r.OutputTokens) * shareInside(outputSpan(r), w)
	}
	a.OutputTokensPerSecond = delivered / length
	a.ArrivalTokensPerSecond = arrived / length
	return a
}

// outputSpan is the time from a request's first to its last output frame;
// from its end to its end when it had no first token.
func outputSpan(r record.Record) Window {
	if !r.FirstToken {
		return Window{Start: r.End(), End: r.End()}
	}
	at := func(s float64) time.Time { return r.Start.Add(time.Duration(s * float64(time.Second))) }
	first := at(r.TTFTSeconds)
	return Window{Start: first, End: latest(first, at(r.LastTokenSeconds))}
}

// shareInside is the share of span that lies in w; a span of no length
// counts whole when it lies in w.
func shareInside(span, w Window) float64 {
	d := span.End.Sub(span.Start)
	if d <= 0 {
		if !span.Start.Before(w.Start) && span.Start.Before(w.End) {
			return 1
		}
		return 0
	}
	overlap := earliest(span.End, w.End).Sub(latest(span.Start, w.Start))
	return max(overlap.Seconds(), 0) / d.Seconds()
}

func startRange(recs []record.Record) (first, last time.Time) {
	for i, r := range recs {
		if i == 0 || r.Start.Before(first) {
			first = r.Start
		}
		if i == 0 || r.Start.After(last) {
			last = r.Start
		}
	}
	return first, last
}

// p95Duration is the nearest-rank p95 of the durations of completed
// requests, zero when there are none.
func p95Duration(recs []record.Record) time.Duration {
	var ds []float64
	for _, r := range recs {
		if r.Outcome == exporter.OutcomeCompleted {
			ds = append(ds, r.DurationSeconds)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	return time.Duration(newSamples(ds).quantile(0.95) * float64(time.Second))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
