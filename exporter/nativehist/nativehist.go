// Package nativehist is tandem's one model of a native histogram, shared by
// the status page, the demo and the report. A Histogram is read from a
// scrape (FromProto) or from a Prometheus query result
// (FromSampleHistogram), summed as PromQL's sum does and read as
// histogram_quantile does. It wraps Prometheus's own FloatHistogram and
// HistogramQuantile, so its numbers are those Prometheus computes.
package nativehist

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser/posrange"
)

// Histogram is a native histogram of exponential buckets. A nil *Histogram
// holds no observations.
type Histogram struct {
	fh *histogram.FloatHistogram
}

// Bucket is one bucket of a Histogram: Count observations between Lower
// and Upper.
type Bucket = histogram.Bucket[float64]

// FromProto reads a histogram as client_golang gathers it and Prometheus
// scrapes it. A histogram without native buckets is an error; client_golang
// marks an empty native histogram with a zero-length span.
func FromProto(h *dto.Histogram) (*Histogram, error) {
	if h == nil || h.Schema == nil && h.ZeroThreshold == nil && len(h.PositiveSpan) == 0 && len(h.NegativeSpan) == 0 {
		return nil, errors.New("histogram has no native buckets")
	}
	fh := &histogram.FloatHistogram{
		Schema:        h.GetSchema(),
		ZeroThreshold: h.GetZeroThreshold(),
		Sum:           h.GetSampleSum(),
		Count:         float64(h.GetSampleCount()),
		ZeroCount:     float64(h.GetZeroCount()),
	}
	if h.SampleCountFloat != nil {
		fh.Count, fh.ZeroCount = h.GetSampleCountFloat(), h.GetZeroCountFloat()
	}
	if len(h.PositiveDelta)+len(h.NegativeDelta) > 0 && len(h.PositiveCount)+len(h.NegativeCount) > 0 {
		return nil, errors.New("native histogram has both integer and float bucket counts")
	}
	fh.PositiveSpans, fh.PositiveBuckets = protoBuckets(h.PositiveSpan, h.PositiveDelta, h.PositiveCount)
	fh.NegativeSpans, fh.NegativeBuckets = protoBuckets(h.NegativeSpan, h.NegativeDelta, h.NegativeCount)
	return valid(fh)
}

// protoBuckets converts spans and either delta-encoded integer counts or
// absolute float counts.
func protoBuckets(spans []*dto.BucketSpan, deltas []int64, counts []float64) ([]histogram.Span, []float64) {
	out := make([]histogram.Span, len(spans))
	for i, s := range spans {
		out[i] = histogram.Span{Offset: s.GetOffset(), Length: s.GetLength()}
	}
	if len(deltas) == 0 {
		return out, slices.Clone(counts)
	}
	buckets := make([]float64, len(deltas))
	var abs int64
	for i, d := range deltas {
		abs += d
		buckets[i] = float64(abs)
	}
	return out, buckets
}

// FromSampleHistogram reads a native histogram as the Prometheus HTTP API
// returns it: the non-empty buckets with their bounds. The schema is
// inferred from the bucket widths (without buckets, the finest schema,
// which any Sum reduces); buckets of custom bounds are an error.
func FromSampleHistogram(sh *model.SampleHistogram) (*Histogram, error) {
	if sh == nil {
		return nil, errors.New("no histogram")
	}
	type regular struct {
		upperAbs float64
		negative bool
		count    float64
	}
	fh := &histogram.FloatHistogram{Schema: histogram.ExponentialSchemaMax, Count: float64(sh.Count), Sum: float64(sh.Sum)}
	var rs []regular
	for _, b := range sh.Buckets {
		lo, hi, c := float64(b.Lower), float64(b.Upper), float64(b.Count)
		switch {
		case lo <= 0 && hi >= 0:
			fh.ZeroThreshold = max(fh.ZeroThreshold, hi, -lo)
			fh.ZeroCount += c
			continue
		case hi < 0:
			lo, hi = -hi, -lo
		}
		s := int32(math.Round(-math.Log2(math.Log2(hi / lo))))
		if !histogram.IsExponentialSchema(s) {
			return nil, fmt.Errorf("bucket %v is not an exponential native histogram bucket", b)
		}
		fh.Schema = min(fh.Schema, s)
		rs = append(rs, regular{upperAbs: hi, negative: float64(b.Upper) < 0, count: c})
	}
	positive, negative := map[int32]float64{}, map[int32]float64{}
	for _, r := range rs {
		i := int32(math.Round(math.Log2(r.upperAbs) * math.Exp2(float64(fh.Schema))))
		if r.negative {
			negative[i] += r.count
		} else {
			positive[i] += r.count
		}
	}
	fh.PositiveSpans, fh.PositiveBuckets = indexedBuckets(positive)
	fh.NegativeSpans, fh.NegativeBuckets = indexedBuckets(negative)
	return valid(fh)
}

// indexedBuckets lays out counts by bucket index as spans and buckets.
func indexedBuckets(counts map[int32]float64) ([]histogram.Span, []float64) {
	var (
		spans   []histogram.Span
		buckets []float64
		next    int32
	)
	for k, i := range slices.Sorted(maps.Keys(counts)) {
		if k == 0 || i != next {
			offset := i
			if k > 0 {
				offset = i - next
			}
			spans = append(spans, histogram.Span{Offset: offset})
		}
		spans[len(spans)-1].Length++
		buckets = append(buckets, counts[i])
		next = i + 1
	}
	return spans, buckets
}

func valid(fh *histogram.FloatHistogram) (*Histogram, error) {
	if !histogram.IsExponentialSchema(fh.Schema) {
		return nil, fmt.Errorf("native histogram schema %d is not exponential", fh.Schema)
	}
	if err := fh.Validate(); err != nil {
		return nil, err
	}
	return &Histogram{fh: fh}, nil
}

// Sum adds histograms bucket by bucket exactly as PromQL's sum does: the
// finer schema is reduced to the coarser one, and the widest zero bucket
// absorbs the buckets of the others that overlap it. Nil histograms are
// skipped; the sum of none is nil.
func Sum(hs ...*Histogram) *Histogram {
	var sum, compensation *histogram.FloatHistogram
	for _, h := range hs {
		switch {
		case h == nil:
		case sum == nil:
			sum = h.fh.Copy()
		default:
			var err error
			if compensation, _, _, err = sum.KahanAdd(h.fh, compensation); err != nil {
				panic("nativehist: " + err.Error()) // every Histogram is exponential and valid
			}
		}
	}
	if sum == nil {
		return nil
	}
	if compensation != nil {
		sum.Add(compensation)
	}
	return &Histogram{fh: sum.Compact(0)}
}

// Count is the number of observations.
func (h *Histogram) Count() float64 {
	if h == nil {
		return 0
	}
	return h.fh.Count
}

// Quantile is histogram_quantile(q, h), computed by Prometheus's own code.
// It interpolates exponentially within a bucket (linearly within the zero
// bucket) and, for q ≥ 0.5, counts the rank from the top. It is NaN without
// observations, -Inf for q < 0 and +Inf for q > 1.
func (h *Histogram) Quantile(q float64) float64 {
	fh := &histogram.FloatHistogram{}
	if h != nil {
		fh = h.fh
	}
	v, _ := promql.HistogramQuantile(q, fh, "", posrange.PositionRange{})
	return v
}

// Reduce returns h with its buckets merged into those of schema, when that
// is coarser than h's.
func (h *Histogram) Reduce(schema int32) *Histogram {
	if h == nil || schema >= h.fh.Schema {
		return h
	}
	fh, err := h.fh.CopyToSchema(schema)
	if err != nil {
		panic("nativehist: " + err.Error()) // every Histogram is valid
	}
	return &Histogram{fh: fh}
}

// Buckets lists the non-empty buckets in ascending order of value: negative
// buckets, the zero bucket, positive buckets.
func (h *Histogram) Buckets() iter.Seq[Bucket] {
	return func(yield func(Bucket) bool) {
		if h == nil {
			return
		}
		for it := h.fh.AllBucketIterator(); it.Next(); {
			if b := it.At(); b.Count != 0 && !yield(b) {
				return
			}
		}
	}
}
