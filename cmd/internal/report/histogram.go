package report

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/prometheus/common/model"
)

// Native histogram schemas run from -4 (buckets grow by 2^16) to 8 (by 2^(1/256)).
const (
	minSchema = -4
	maxSchema = 8
)

// histogram holds the buckets of a native histogram: exponential buckets of
// one schema and a zero bucket. Positive bucket i covers
// (2^((i-1)·2^-schema), 2^(i·2^-schema)]; negative bucket i is its mirror
// image below zero.
type histogram struct {
	schema        int32
	zeroThreshold float64
	zeroCount     float64
	positive      map[int]float64
	negative      map[int]float64
}

func newHistogram() *histogram {
	return &histogram{schema: maxSchema, positive: map[int]float64{}, negative: map[int]float64{}}
}

// fromSampleHistogram reads the buckets the Prometheus HTTP API returns. The
// schema is inferred from the bucket widths.
func fromSampleHistogram(sh *model.SampleHistogram) (*histogram, error) {
	h := newHistogram()
	if sh == nil {
		return h, nil
	}
	type regular struct {
		upperAbs float64
		negative bool
		count    float64
	}
	var rs []regular
	for _, b := range sh.Buckets {
		lo, hi, c := float64(b.Lower), float64(b.Upper), float64(b.Count)
		switch {
		case lo <= 0 && hi >= 0:
			h.zeroThreshold = max(h.zeroThreshold, hi, -lo)
			h.zeroCount += c
			continue
		case hi < 0:
			lo, hi = -hi, -lo
		}
		s := int32(math.Round(-math.Log2(math.Log2(hi / lo))))
		if s < minSchema || s > maxSchema {
			return nil, fmt.Errorf("bucket %v is not an exponential native histogram bucket", b)
		}
		h.schema = min(h.schema, s)
		rs = append(rs, regular{upperAbs: hi, negative: float64(b.Upper) < 0, count: c})
	}
	for _, r := range rs {
		i := int(math.Round(math.Log2(r.upperAbs) * math.Exp2(float64(h.schema))))
		if r.negative {
			h.negative[i] += r.count
		} else {
			h.positive[i] += r.count
		}
	}
	return h, nil
}

// add merges o into h bucket by bucket, as PromQL's sum does: the finer
// schema is reduced to the coarser one first.
func (h *histogram) add(o *histogram) {
	if o.schema < h.schema {
		h.reduce(o.schema)
	}
	delta := h.schema - o.schema
	for i, c := range o.positive {
		h.positive[((i-1)>>-delta)+1] += c
	}
	for i, c := range o.negative {
		h.negative[((i-1)>>-delta)+1] += c
	}
	h.zeroThreshold = max(h.zeroThreshold, o.zeroThreshold)
	h.zeroCount += o.zeroCount
}

func (h *histogram) reduce(schema int32) {
	delta := h.schema - schema
	regroup := func(m map[int]float64) map[int]float64 {
		out := map[int]float64{}
		for i, c := range m {
			out[((i-1)>>delta)+1] += c
		}
		return out
	}
	h.positive, h.negative, h.schema = regroup(h.positive), regroup(h.negative), schema
}

type bucket struct{ lower, upper, count float64 }

func (h *histogram) bound(i int) float64 {
	return math.Exp2(float64(i) * math.Exp2(-float64(h.schema)))
}

// buckets lists the non-empty buckets in ascending order of value.
func (h *histogram) buckets() []bucket {
	var out []bucket
	for _, i := range slices.Backward(slices.Sorted(maps.Keys(h.negative))) {
		if c := h.negative[i]; c > 0 {
			out = append(out, bucket{-h.bound(i), -h.bound(i - 1), c})
		}
	}
	if h.zeroCount > 0 {
		out = append(out, bucket{-h.zeroThreshold, h.zeroThreshold, h.zeroCount})
	}
	for _, i := range slices.Sorted(maps.Keys(h.positive)) {
		if c := h.positive[i]; c > 0 {
			out = append(out, bucket{h.bound(i - 1), h.bound(i), c})
		}
	}
	return out
}

func (h *histogram) total() float64 {
	t := h.zeroCount
	for _, c := range h.positive {
		t += c
	}
	for _, c := range h.negative {
		t += c
	}
	return t
}

// count is the number of observations, rounded: increase() extrapolates to
// the window's edges and returns fractional counts.
func (h *histogram) count() int { return int(math.Round(h.total())) }

// quantile interpolates linearly within the bucket that holds the rank, as
// histogram_quantile does; the true value lies in that bucket.
func (h *histogram) quantile(q float64) float64 {
	bs := h.buckets()
	if len(bs) == 0 {
		return math.NaN()
	}
	rank, cum := q*h.total(), 0.0
	for _, b := range bs {
		if cum+b.count >= rank {
			return b.lower + (b.upper-b.lower)*(rank-cum)/b.count
		}
		cum += b.count
	}
	return bs[len(bs)-1].upper
}

// quantileCI widens the order-statistic interval to bucket bounds: the
// lower bound of the bucket holding the lower rank, the upper bound of the
// bucket holding the upper rank.
func (h *histogram) quantileCI(q, level float64) Interval {
	l, u := orderStatisticRanks(h.count(), q, level)
	ci := Interval{math.Inf(-1), math.Inf(1)}
	cum := 0.0
	lowerSet := false
	for _, b := range h.buckets() {
		cum += b.count
		if !lowerSet && l >= 1 && cum >= float64(l)-0.5 {
			ci[0], lowerSet = b.lower, true
		}
		if u <= h.count() && cum >= float64(u)-0.5 {
			ci[1] = b.upper
			break
		}
	}
	return ci
}

// below counts the observations in buckets entirely below zero; the zero
// bucket holds ties.
func (h *histogram) below() float64 {
	t := 0.0
	for _, c := range h.negative {
		t += c
	}
	return t
}
