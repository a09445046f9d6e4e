package report

import (
	"math"
	"slices"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

// distribution is a set of observations a quantile can be read from: the
// individual timings of records, or the buckets of a native histogram.
type distribution interface {
	// count is the number of observations.
	count() int
	// quantile is the q-quantile, NaN when there are no observations.
	quantile(q float64) float64
	// quantileCI is a distribution-free interval that covers the true
	// q-quantile with probability at least level. A bound the data cannot
	// give is infinite.
	quantileCI(q, level float64) Interval
}

// samples are individual observations; quantiles are exact order statistics.
type samples []float64

func newSamples(xs []float64) samples {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

func (s samples) count() int { return len(s) }

// quantile is the nearest-rank q-quantile: the ceil(q·n)-th smallest value.
func (s samples) quantile(q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return quantile.Of(s, q)
}

func (s samples) quantileCI(q, level float64) Interval {
	l, u := orderStatisticRanks(len(s), q, level)
	ci := Interval{math.Inf(-1), math.Inf(1)}
	if l >= 1 {
		ci[0] = s[l-1]
	}
	if u <= len(s) {
		ci[1] = s[u-1]
	}
	return ci
}

// exactBinomialLimit is the largest n for which orderStatisticRanks sums the
// binomial distribution exactly; above it the normal approximation is used.
const exactBinomialLimit = 1_000_000

// orderStatisticRanks returns 1-based ranks l ≤ u such that the l-th and u-th
// smallest of n observations enclose the q-quantile with probability at
// least level, whatever the distribution: the number of observations below
// the quantile is Binomial(n, q). l < 1 or u > n means the data cannot bound
// that side.
func orderStatisticRanks(n int, q, level float64) (l, u int) {
	alpha := (1 - level) / 2
	if n <= 0 {
		return 0, 1
	}
	if n > exactBinomialLimit {
		z := normalQuantile(1 - alpha)
		mean, sd := float64(n)*q, math.Sqrt(float64(n)*q*(1-q))
		return int(math.Floor(mean - z*sd)), int(math.Ceil(mean+z*sd)) + 1
	}
	l, u = 0, n+1
	logN := lgamma(float64(n) + 1)
	lq, l1q := math.Log(q), math.Log1p(-q)
	cdf := 0.0
	for k := 0; k <= n; k++ {
		cdf += math.Exp(logN - lgamma(float64(k)+1) - lgamma(float64(n-k)+1) + float64(k)*lq + float64(n-k)*l1q)
		if cdf <= alpha {
			l = k + 1
		}
		if cdf >= 1-alpha {
			u = k + 1
			break
		}
	}
	return l, u
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

// normalQuantile is the p-quantile of the standard normal distribution.
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// wilson is the Wilson score interval of a binomial proportion of successes
// out of n trials at the given confidence level.
func wilson(successes, n int, level float64) Interval {
	if n <= 0 {
		return Interval{math.NaN(), math.NaN()}
	}
	z := normalQuantile(1 - (1-level)/2)
	p, nf := float64(successes)/float64(n), float64(n)
	center := (p + z*z/(2*nf)) / (1 + z*z/nf)
	half := z / (1 + z*z/nf) * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return Interval{max(center-half, 0), min(center+half, 1)}
}

// reciprocal is the distribution of 1/x for a distribution of positive x:
// a monotonic transform, so its q-quantile is 1 over the (1-q)-quantile.
type reciprocal struct{ of distribution }

func (r reciprocal) count() int { return r.of.count() }

func (r reciprocal) quantile(q float64) float64 { return 1 / r.of.quantile(1-q) }

func (r reciprocal) quantileCI(q, level float64) Interval {
	ci := r.of.quantileCI(1-q, level)
	lo, hi := 1/ci[1], math.Inf(1)
	if ci[0] > 0 {
		hi = 1 / ci[0]
	}
	return Interval{lo, hi}
}
