package bench

import (
	"math"
	"slices"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

// percentile returns the q-quantile (0 < q <= 1) of ds by the nearest-rank
// method: the smallest value with at least q of the samples at or below it.
// It is NaN for no samples.
func percentile(ds []time.Duration, q float64) float64 {
	seconds := make([]float64, len(ds))
	for i, d := range ds {
		seconds[i] = d.Seconds()
	}
	slices.Sort(seconds)
	return quantile.Of(seconds, q)
}

// ratio is a/b, NaN when b is zero or either is not a number.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// perUnit is total/n, NaN when n is not positive.
func perUnit(total float64, n int) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return total / float64(n)
}

// spread is the run-to-run noise of a q-quantile: the range (largest minus
// smallest) of the q-quantiles of the rounds, in seconds. It is zero for
// fewer than two rounds.
func spread(rounds [][]time.Duration, q float64) float64 {
	if len(rounds) < 2 {
		return 0
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rounds {
		v := percentile(r, q)
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}
