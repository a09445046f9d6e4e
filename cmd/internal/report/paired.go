package report

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

// pairedSamples are one quantity measured on both arms for the same
// requests: a[i] and b[i] belong to pair i. The order is fixed (by pair ID)
// so that the bootstrap of the same records gives the same interval.
type pairedSamples struct {
	a, b []float64
	seed uint64
}

// seedOf is a seed taken from the pair IDs, so that the same records always
// give the same report.
func seedOf(ids []string) uint64 {
	h := fnv.New64a()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// Bootstrap cost: resamples times pairs is kept below bootstrapBudget, with
// at least minResamples and at most maxResamples resamples.
const (
	maxResamples    = 2000
	minResamples    = 1000
	bootstrapBudget = 100_000_000
)

// quantileDifference is the comparison of B's q-quantile with A's.
type quantileDifference struct {
	q float64
	// diff is quantile(B) - quantile(A); ci its interval at level.
	diff float64
	ci   Interval
	// ratio is quantile(B) / quantile(A); ratioCI its interval at level.
	ratio   float64
	ratioCI Interval
	// a is A's q-quantile, the reference of the margin.
	a float64
}

// bootstrap compares B's quantiles qs (ascending) with A's by a percentile
// bootstrap over pairs: each resample draws len(a) pair indices with
// replacement and takes quantile(B) - quantile(A) and quantile(B) /
// quantile(A) of the resample, so that whatever the two arms share within a
// pair (prompt length, load at that moment) cancels. The interval holds
// the middle level of the resampled values.
func (p pairedSamples) bootstrap(qs []float64, level float64) []quantileDifference {
	n := len(p.a)
	out := make([]quantileDifference, len(qs))
	sa, sb := slices.Sorted(slices.Values(p.a)), slices.Sorted(slices.Values(p.b))
	for i, q := range qs {
		qa, qb := quantile.Of(sa, q), quantile.Of(sb, q)
		out[i] = quantileDifference{q: q, diff: qb - qa, ratio: qb / qa, a: qa,
			ci: Interval{math.NaN(), math.NaN()}, ratioCI: Interval{math.NaN(), math.NaN()}}
	}
	if n < 2 {
		return out
	}
	resamples := min(max(bootstrapBudget/n, minResamples), maxResamples)
	orderA, orderB := order(p.a), order(p.b)
	ranks := make([]int, len(qs))
	for i, q := range qs {
		ranks[i] = quantile.Rank(n, q)
	}
	rng := rand.New(rand.NewPCG(p.seed, uint64(n)))
	counts := make([]int32, n)
	diffs := make([][]float64, len(qs))
	ratios := make([][]float64, len(qs))
	qa, qb := make([]float64, len(qs)), make([]float64, len(qs))
	for range resamples {
		clear(counts)
		for range n {
			counts[rng.IntN(n)]++
		}
		weightedQuantiles(p.a, orderA, counts, ranks, qa)
		weightedQuantiles(p.b, orderB, counts, ranks, qb)
		for i := range qs {
			diffs[i] = append(diffs[i], qb[i]-qa[i])
			ratios[i] = append(ratios[i], qb[i]/qa[i])
		}
	}
	for i := range qs {
		out[i].ci = percentileInterval(diffs[i], level)
		out[i].ratioCI = percentileInterval(ratios[i], level)
	}
	return out
}

// order is the indices of xs by ascending value.
func order(xs []float64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		switch {
		case xs[i] < xs[j]:
			return -1
		case xs[i] > xs[j]:
			return 1
		}
		return 0
	})
	return idx
}

// weightedQuantiles writes to out the values at the 1-based ranks
// (ascending) of the resample that holds counts[i] copies of xs[i], walking
// xs in ascending order.
func weightedQuantiles(xs []float64, order []int, counts []int32, ranks []int, out []float64) {
	cum, k := 0, 0
	for _, i := range order {
		cum += int(counts[i])
		for k < len(ranks) && cum >= ranks[k] {
			out[k] = xs[i]
			k++
		}
		if k == len(ranks) {
			return
		}
	}
}

// percentileInterval is the interval holding the middle level of xs.
func percentileInterval(xs []float64, level float64) Interval {
	slices.Sort(xs)
	alpha := (1 - level) / 2
	lo := int(math.Floor(alpha * float64(len(xs))))
	hi := int(math.Ceil((1-alpha)*float64(len(xs)))) - 1
	return Interval{xs[lo], xs[min(max(hi, lo), len(xs)-1)]}
}
