package report

import (
	"math"

	"github.com/kestrelops/tandem/exporter/nativehist"
)

// histogram is a native histogram read as a distribution: quantiles as
// histogram_quantile returns them, intervals widened to bucket bounds. Nil
// holds no observations.
type histogram struct{ *nativehist.Histogram }

// count is the number of observations, rounded: increase() extrapolates to
// the window's edges and returns fractional counts.
func (h histogram) count() int { return int(math.Round(h.Count())) }

func (h histogram) quantile(q float64) float64 { return h.Quantile(q) }

// quantileCI widens the order-statistic interval to bucket bounds: the
// lower bound of the bucket holding the lower rank, the upper bound of the
// bucket holding the upper rank.
func (h histogram) quantileCI(q, level float64) Interval {
	l, u := orderStatisticRanks(h.count(), q, level)
	ci := Interval{math.Inf(-1), math.Inf(1)}
	cum := 0.0
	lowerSet := false
	for b := range h.Buckets() {
		cum += b.Count
		if !lowerSet && l >= 1 && cum >= float64(l)-0.5 {
			ci[0], lowerSet = b.Lower, true
		}
		if u <= h.count() && cum >= float64(u)-0.5 {
			ci[1] = b.Upper
			break
		}
	}
	return ci
}

// below counts the observations in buckets entirely below zero; the zero
// bucket holds ties.
func (h histogram) below() float64 {
	t := 0.0
	for b := range h.Buckets() {
		if b.Upper < 0 {
			t += b.Count
		}
	}
	return t
}
