// Package quantile is the one definition of a sample quantile that tandem's
// commands use: the nearest rank, an order statistic that is always one of
// the observed values; and of the per-request samples of one arm that
// quantiles are read from.
package quantile

import (
	"math"
	"slices"

	"github.com/kestrelops/tandem/exporter"
)

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

// Samples are the per-request figures of one arm's completed requests, each
// sorted ascending for Of.
type Samples struct {
	Completed    int
	OutputTokens int
	// TTFT and ITL are in seconds, Speed in output tokens per second; each
	// holds the requests on which exporter.Observation defines it.
	TTFT, ITL, Speed []float64
}

// SamplesOf gathers the samples of items, one request each, that
// completed.
func SamplesOf[T any](items []T, observation func(T) exporter.Observation) Samples {
	var s Samples
	for _, item := range items {
		o := observation(item)
		if o.Outcome != exporter.OutcomeCompleted {
			continue
		}
		s.Completed++
		s.OutputTokens += o.OutputTokens
		if o.FirstToken {
			s.TTFT = append(s.TTFT, o.TTFT.Seconds())
		}
		if itl, ok := o.InterTokenLatency(); ok {
			s.ITL = append(s.ITL, itl.Seconds())
		}
		if speed, ok := o.OutputSpeed(); ok {
			s.Speed = append(s.Speed, speed)
		}
	}
	slices.Sort(s.TTFT)
	slices.Sort(s.ITL)
	slices.Sort(s.Speed)
	return s
}
