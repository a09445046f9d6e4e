package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
)

// mirroredRun is an open-loop mirrored run of class fresh: n requests every
// gap, each sent to A and B at the same moment, with 100 to 300 output
// tokens. Response i of an arm (0 for A, 1 for B) lasts duration(side, i)
// seconds: first token after 0.2 s, last token 0.1 s before the end.
func mirroredRun(n int, gap time.Duration, duration func(side, i int) float64) []record.Record {
	var out []record.Record
	for i := range n {
		for side, config := range exporter.Arms {
			d := duration(side, i)
			out = append(out, record.Record{
				Start:            t0.Add(time.Duration(i) * gap),
				Config:           config,
				Class:            exporter.ClassFresh,
				PairID:           fmt.Sprint(i),
				Outcome:          exporter.OutcomeCompleted,
				FirstToken:       true,
				TTFTSeconds:      0.2,
				LastTokenSeconds: d - 0.1,
				DurationSeconds:  d,
				OutputTokens:     100 + 50*(i%5),
			})
		}
	}
	return out
}

// constant durations: the arm kept up. B's streams decode twice as fast as
// A's (4 s from first to last token against 8 s).
func bothKeptUp(side, _ int) float64 { return [2]float64{8.3, 4.3}[side] }

// aFellBehind: A's responses take 20 ms longer with each arrival (its
// backlog grows), B's take the same time all along.
func aFellBehind(side, i int) float64 { return 4.3 + float64(1-side)*0.02*float64(i) }

func TestKeepUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recs     []record.Record
		want     string
		tooShort string
	}{
		{"both kept up, B streams twice as fast", mirroredRun(600, 100*time.Millisecond, bothKeptUp), OutputRateTie, ""},
		{"A's backlog grew", mirroredRun(600, 100*time.Millisecond, aFellBehind), OutputRateAFellBehind, ""},
		{"B's backlog grew", mirroredRun(600, 100*time.Millisecond, func(side, i int) float64 { return aFellBehind(1-side, i) }), OutputRateBFellBehind, ""},
		{"window shorter than two warm-ups", mirroredRun(200, 50*time.Millisecond, bothKeptUp), OutputRateTooShort, "lasts 1.65 s, less than 2 warm-ups"},
		{"too few requests in the window", mirroredRun(25, 5*time.Second, bothKeptUp), OutputRateTooShort, "holds 23 completed requests of A and 23 of B, fewer than the 30 needed per arm"},
		{"no records of B", mirroredRun(600, 100*time.Millisecond, bothKeptUp)[:1], OutputRateTooShort, "A or B has no requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := KeepUp(tc.recs, 0.02)
			if k.Case != tc.want {
				t.Errorf("case = %q, want %q (steady A %g, B %g tokens/s over %v)", k.Case, tc.want,
					k.Arms[exporter.ConfigA].OutputTokensPerSecond, k.Arms[exporter.ConfigB].OutputTokensPerSecond, k.Window)
			}
			if got := k.TooShortReason(); tc.tooShort == "" && got != "" || tc.tooShort != "" && !strings.Contains(got, tc.tooShort) {
				t.Errorf("too short reason = %q, want %q", got, tc.tooShort)
			}
		})
	}
}

func TestKeepUpWindow(t *testing.T) {
	k := KeepUp(mirroredRun(600, 100*time.Millisecond, bothKeptUp), 0.02)
	if k.WarmUp != 8300*time.Millisecond {
		t.Errorf("warm-up = %v, want A's p95 duration, 8.3s", k.WarmUp)
	}
	if want := (Window{Start: t0.Add(8300 * time.Millisecond), End: t0.Add(59900 * time.Millisecond)}); k.Window != want {
		t.Errorf("window = %+v, want %+v", k.Window, want)
	}
	// 200 tokens per request on average, 10 requests a second.
	for _, config := range exporter.Arms {
		a := k.Arms[config]
		if math.Abs(a.OutputTokensPerSecond-2000) > 20 || math.Abs(a.ArrivalTokensPerSecond-2000) > 20 {
			t.Errorf("%s: steady %g, arrivals %g tokens/s, want both about 2000", config, a.OutputTokensPerSecond, a.ArrivalTokensPerSecond)
		}
		if a.Requests != 517 {
			t.Errorf("%s: %d requests started in the window, want 517", config, a.Requests)
		}
	}
}

func TestShareInside(t *testing.T) {
	w := Window{Start: t0.Add(10 * time.Second), End: t0.Add(20 * time.Second)}
	span := func(from, to float64) Window {
		return Window{Start: t0.Add(time.Duration(from * float64(time.Second))), End: t0.Add(time.Duration(to * float64(time.Second)))}
	}
	for _, tc := range []struct {
		span Window
		want float64
	}{
		{span(12, 14), 1},
		{span(5, 15), 0.5},
		{span(18, 28), 0.2},
		{span(0, 40), 0.25},
		{span(1, 9), 0},
		{span(15, 15), 1},
		{span(10, 10), 1},
		{span(20, 20), 0},
	} {
		if got := shareInside(tc.span, w); !near(got, tc.want) {
			t.Errorf("shareInside(%v to %v) = %g, want %g", tc.span.Start.Sub(t0), tc.span.End.Sub(t0), got, tc.want)
		}
	}
}

// The finite-run bias the steady-state window removes: both arms kept up,
// but A's slower streams take longer to drain, so its rate from first start
// to last end is lower by more than the tolerance.
func TestReportBothKeptUp(t *testing.T) {
	r := fromRecords(t, mirroredRun(600, 100*time.Millisecond, bothKeptUp))
	c := r.Classes[0]
	if got := float64(c.OutputRateRatio); math.Abs(got-1) <= DefaultOptions().RateTolerance {
		t.Fatalf("system output rate ratio = %g; the fixture must show the drain bias", got)
	}
	if c.OutputRateVerdict != Equivalent || c.OutputRateCase != OutputRateTie {
		t.Errorf("output rate %q (%q), want equivalent (tie)", c.OutputRateVerdict, c.OutputRateCase)
	}
	if c.PerRequestSpeedVerdict != Higher {
		t.Errorf("per-request speed %q, want higher: B streams twice as fast", c.PerRequestSpeedVerdict)
	}
	if r.Regressed() {
		t.Error("Regressed() = true, want false")
	}
	wantContains(t, "decision", r.Decision, "system output rates tie in the steady state", "from first request start to last response end, which holds each arm's ramp-up and drain", "so no capacity claim can be made")
	wantContains(t, "because", r.Because, "steady-state output rates (51.6 s window", "after a warm-up of 8.3 s) tie within 2.0%")
	wantNotContains(t, "decision and because", append(r.Decision, r.Because...), "A fell behind", "B fell behind")
	j := decodeJSON(t, r)
	if got := j.Classes[0].RateCase; got != OutputRateTie {
		t.Errorf("JSON output_rate_case = %q, want tie", got)
	}
	for _, config := range exporter.Arms {
		if got := j.Classes[0].Arms[config].SteadyOutputRate; math.Abs(got-2000) > 20 {
			t.Errorf("JSON %s steady_output_tokens_per_second = %g, want about 2000", config, got)
		}
	}
}

func TestReportFellBehind(t *testing.T) {
	for _, tc := range []struct {
		name     string
		duration func(side, i int) float64
		verdict  string
		rateCase string
		behind   string
	}{
		{"A", aFellBehind, Higher, OutputRateAFellBehind, "B raised the system output rate"},
		{"B", func(side, i int) float64 { return aFellBehind(1-side, i) }, Lower, OutputRateBFellBehind, "B lowered the system output rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fromRecords(t, mirroredRun(600, 100*time.Millisecond, tc.duration))
			c := r.Classes[0]
			if c.OutputRateVerdict != tc.verdict || c.OutputRateCase != tc.rateCase {
				t.Errorf("output rate %q (%q), want %q (%q)", c.OutputRateVerdict, c.OutputRateCase, tc.verdict, tc.rateCase)
			}
			if got := r.Regressed(); got != (tc.verdict == Lower) {
				t.Errorf("Regressed() = %v", got)
			}
			wantContains(t, "decision", r.Decision, tc.behind, tc.name+" fell behind the arrivals")
			wantContains(t, "because", r.Because, "beyond the 2.0% tie tolerance and the ", "the window's edges can make by chance: "+tc.name+" fell behind (its backlog grew)")
		})
	}
}

func TestReportTooShort(t *testing.T) {
	r := fromRecords(t, mirroredRun(200, 50*time.Millisecond, bothKeptUp))
	c := r.Classes[0]
	if c.OutputRateVerdict != Inconclusive || c.OutputRateCase != OutputRateTooShort {
		t.Errorf("output rate %q (%q), want inconclusive (too_short)", c.OutputRateVerdict, c.OutputRateCase)
	}
	if c.TTFTP95Verdict == InsufficientData {
		t.Error("TTFT p95 verdict withheld; only the output rate comparison needs a steady state")
	}
	wantContains(t, "decision", r.Decision, "the run is too short to judge capacity", "lasts 1.65 s, less than 2 warm-ups")
	wantContains(t, "because", r.Because, "output rates not judged, because the steady-state window")
	wantContains(t, "what would change it", r.WhatWouldChangeIt, "A longer run of class fresh")
	if got := decodeJSON(t, r).Classes[0].RateCase; got != OutputRateTooShort {
		t.Errorf("JSON output_rate_case = %q, want too_short", got)
	}
}

// One heavy request straddling the window's end makes B's steady-state
// rate higher by more than the tolerance, by chance alone: both arms kept
// up, and the edge noise says the window cannot tell.
func TestKeepUpWithinEdgeNoise(t *testing.T) {
	recs := mirroredRun(40, time.Second, bothKeptUp)
	for i := range recs {
		if recs[i].PairID == "38" {
			recs[i].OutputTokens = 5000
		}
	}
	k := KeepUp(recs, 0.02)
	if r := k.Ratio(); r-1 <= 0.02 {
		t.Fatalf("ratio = %g; the fixture must differ beyond the tolerance", r)
	}
	if k.Case != OutputRateTooShort || k.Ratio()-1 >= k.EdgeNoise {
		t.Errorf("case %q, ratio %g, edge noise %g; want too_short within the noise", k.Case, k.Ratio(), k.EdgeNoise)
	}
	wantContains(t, "too short reason", k.TooShortReason(), "that the requests straddling the window's edges can make by chance")
}

// poissonRun is a minute of Poisson arrivals at 8 requests/s with 90 to 210
// output tokens, mirrored to A and B; A decodes at 45 ms a token, B at 26,
// and A's responses take growth seconds longer per second of the run.
func poissonRun(seed uint64, growth float64) []record.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []record.Record
	for i, at := 0, 0.0; at < 60; i, at = i+1, at+rng.ExpFloat64()/8 {
		tokens := 90 + rng.IntN(121)
		for side, config := range exporter.Arms {
			last := 0.2 + [2]float64{0.045, 0.026}[side]*float64(tokens) + float64(1-side)*growth*at
			out = append(out, record.Record{
				Start: t0.Add(time.Duration(at * float64(time.Second))), Config: config, Class: exporter.ClassFresh,
				PairID: fmt.Sprint(i), Outcome: exporter.OutcomeCompleted, FirstToken: true,
				TTFTSeconds: 0.2, LastTokenSeconds: last, DurationSeconds: last + 0.01, OutputTokens: tokens,
			})
		}
	}
	return out
}

func TestKeepUpPoisson(t *testing.T) {
	const runs = 200
	for _, tc := range []struct {
		name    string
		growth  float64
		want    string
		atLeast int
	}{
		{"both kept up", 0, OutputRateTie, runs * 95 / 100},
		{"A's backlog grew", 0.1, OutputRateAFellBehind, runs * 90 / 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases := map[string]int{}
			for seed := range uint64(runs) {
				cases[KeepUp(poissonRun(seed, tc.growth), 0.02).Case]++
			}
			if cases[tc.want] < tc.atLeast {
				t.Errorf("cases over %d seeded runs = %v, want %s in at least %d", runs, cases, tc.want, tc.atLeast)
			}
		})
	}
}

// Both arms' responses get shorter over the run, so both drain a backlog
// and deliver above the arrival side; A, with more to drain, delivers more.
// The lower arm still kept up with the arrivals: no one fell behind.
func TestKeepUpBothDrained(t *testing.T) {
	k := KeepUp(mirroredRun(600, 100*time.Millisecond, func(side, i int) float64 {
		return [2]float64{12.3, 4.3}[side] - [2]float64{0.01, 0.002}[side]*float64(i)
	}), 0.02)
	if r := k.Ratio(); 1-r <= 0.02 {
		t.Fatalf("ratio = %g; the fixture must have B lower beyond the tolerance", r)
	}
	if b := k.Arms[exporter.ConfigB]; b.OutputTokensPerSecond < b.ArrivalTokensPerSecond {
		t.Fatalf("B delivered %g tokens/s, arrivals %g; the fixture must have B keep up", b.OutputTokensPerSecond, b.ArrivalTokensPerSecond)
	}
	if k.Case != OutputRateTie {
		t.Errorf("case = %q, want tie", k.Case)
	}
}
