// Package quantile is the one definition of a sample quantile that tandem's
// commands use: the nearest rank, an order statistic that is always one of
// the observed values.
package quantile

import "math"

// Rank is the 1-based nearest rank of the q-quantile of n values, ceil(q·n),
// clamped to [1, n]. A q·n that floating point puts a hair above an integer
// (0.07·100) counts as that integer.
func Rank(n int, q float64) int {
	r := int(math.Ceil(q*float64(n) - 1e-9))
	return min(max(r, 1), n)
}

// Of returns the q-quantile of sorted, an ascending slice: the smallest
// value with at least q of the values at or below it. It is NaN for no
// values.
func Of(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[Rank(len(sorted), q)-1]
}
