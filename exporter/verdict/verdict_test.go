package verdict_test

import (
	"math"
	"testing"

	"github.com/kestrelops/tandem/exporter/verdict"
)

func TestLatency(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, margin float64
		want           string
	}{
		{0.01, 0.05, 0.005, verdict.Slower},
		{-0.05, -0.01, 0.005, verdict.Faster},
		{0.001, 0.004, 0.005, verdict.Equivalent},
		{-0.004, 0.004, 0.005, verdict.Equivalent},
		{-0.004, 0.012, 0.005, verdict.Inconclusive},
		{-0.02, 0.004, 0.005, verdict.Inconclusive},
		{0.002, 0.02, 0.005, verdict.Slower},
		{math.Inf(-1), 0.01, 0.005, verdict.InsufficientData},
		{math.NaN(), 0.01, 0.005, verdict.InsufficientData},
	} {
		if got := verdict.Latency(tc.lo, tc.hi, tc.margin); got != tc.want {
			t.Errorf("Latency(%g, %g, %g) = %s, want %s", tc.lo, tc.hi, tc.margin, got, tc.want)
		}
	}
	if got := verdict.Rate(0.01, 0.05, 0.005); got != verdict.Higher {
		t.Errorf("Rate above zero = %s, want higher", got)
	}
	if got := verdict.Rate(-0.05, -0.01, 0.005); got != verdict.Lower {
		t.Errorf("Rate below zero = %s, want lower", got)
	}
}
