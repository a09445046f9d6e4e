package report

import (
	"math"
	"testing"
)

func TestOrderStatisticRanks(t *testing.T) {
	// Ranks from the binomial distribution; n=100 and n=20 medians are the
	// textbook intervals (X(40), X(61)) and (X(6), X(15)).
	for _, tc := range []struct {
		n        int
		q        float64
		wantL    int
		wantU    int
		bounded  bool
		coverage float64
	}{
		{n: 100, q: 0.5, wantL: 40, wantU: 61, bounded: true},
		{n: 20, q: 0.5, wantL: 6, wantU: 15, bounded: true},
		{n: 400, q: 0.95, wantL: 371, wantU: 389, bounded: true},
		{n: 1000, q: 0.95, wantL: 936, wantU: 964, bounded: true},
		{n: 50, q: 0.99, wantL: 48, wantU: 51, bounded: false},
	} {
		l, u := orderStatisticRanks(tc.n, tc.q, 0.95)
		if l != tc.wantL || u != tc.wantU {
			t.Errorf("orderStatisticRanks(%d, %g) = %d, %d; want %d, %d", tc.n, tc.q, l, u, tc.wantL, tc.wantU)
		}
		if got := l >= 1 && u <= tc.n; got != tc.bounded {
			t.Errorf("n=%d q=%g: bounded = %v, want %v", tc.n, tc.q, got, tc.bounded)
		}
	}
}

func TestOrderStatisticRanksNormalApproximation(t *testing.T) {
	n := exactBinomialLimit + 1
	l, u := orderStatisticRanks(n, 0.95, 0.95)
	mean, sd := 0.95*float64(n), math.Sqrt(float64(n)*0.95*0.05)
	if math.Abs(float64(l)-(mean-1.96*sd)) > 2 || math.Abs(float64(u)-(mean+1.96*sd)) > 2 {
		t.Errorf("ranks %d, %d; want about %.0f, %.0f", l, u, mean-1.96*sd, mean+1.96*sd)
	}
}

func TestSamplesQuantileAndCI(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[len(xs)-1-i] = float64(i + 1) // 100 down to 1: newSamples must sort
	}
	s := newSamples(xs)
	for q, want := range map[float64]float64{0.5: 50, 0.95: 95, 0.99: 99, 0.001: 1, 1: 100} {
		if got := s.quantile(q); got != want {
			t.Errorf("quantile(%g) = %g, want %g", q, got, want)
		}
	}
	if got, want := s.quantileCI(0.5, 0.95), (Interval{40, 61}); got != want {
		t.Errorf("median CI = %v, want %v", got, want)
	}
	if got := newSamples(xs[:50]).quantileCI(0.99, 0.95); !math.IsInf(got[1], 1) {
		t.Errorf("p99 CI of 50 samples = %v, want an unbounded upper end", got)
	}
	if got := samples(nil).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of no samples = %g, want NaN", got)
	}
}

func TestWilson(t *testing.T) {
	for _, tc := range []struct {
		x, n   int
		lo, hi float64
	}{
		{8, 10, 0.4901625, 0.9433178},
		{50, 100, 0.4038315, 0.5961685},
		{0, 400, 0, 0.0095123},
		{400, 400, 0.9904877, 1},
	} {
		got := wilson(tc.x, tc.n, 0.95)
		if math.Abs(got[0]-tc.lo) > 1e-6 || math.Abs(got[1]-tc.hi) > 1e-6 {
			t.Errorf("wilson(%d, %d) = %v, want [%g, %g]", tc.x, tc.n, got, tc.lo, tc.hi)
		}
	}
}

func TestReciprocal(t *testing.T) {
	itl := newSamples([]float64{0.01, 0.02, 0.04, 0.05, 0.1})
	r := reciprocal{itl}
	if got := r.quantile(0.5); got != 25 {
		t.Errorf("median of 1/x = %g, want 25", got)
	}
	ci := r.quantileCI(0.5, 0.5)
	lo, hi := itl.quantileCI(0.5, 0.5)[1], itl.quantileCI(0.5, 0.5)[0]
	if ci[0] != 1/lo || ci[1] != 1/hi {
		t.Errorf("CI of 1/x = %v, want [1/%g, 1/%g]", ci, lo, hi)
	}
}
