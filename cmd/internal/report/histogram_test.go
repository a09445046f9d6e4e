package report

import (
	"math"
	"slices"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/kestrelops/tandem/proxy/record"
)

// zeroThreshold is client_golang's default native histogram zero threshold.
const zeroThreshold = 2.938735877055719e-39

// nativeHistogram builds the buckets the Prometheus HTTP API returns for a
// native histogram of schema s holding xs.
func nativeHistogram(s int, xs ...float64) *model.SampleHistogram {
	pos, neg := map[int]float64{}, map[int]float64{}
	h := &model.SampleHistogram{}
	zero := 0.0
	for _, x := range xs {
		h.Count++
		h.Sum += model.FloatString(x)
		switch {
		case math.Abs(x) <= zeroThreshold:
			zero++
		case x > 0:
			pos[int(math.Ceil(math.Log2(x)*math.Exp2(float64(s))))]++
		default:
			neg[int(math.Ceil(math.Log2(-x)*math.Exp2(float64(s))))]++
		}
	}
	bound := func(i int) float64 { return math.Exp2(float64(i) * math.Exp2(-float64(s))) }
	for i, c := range neg {
		h.Buckets = append(h.Buckets, &model.HistogramBucket{Boundaries: 1, Lower: model.FloatString(-bound(i)), Upper: model.FloatString(-bound(i - 1)), Count: model.FloatString(c)})
	}
	if zero > 0 {
		h.Buckets = append(h.Buckets, &model.HistogramBucket{Boundaries: 3, Lower: -zeroThreshold, Upper: zeroThreshold, Count: model.FloatString(zero)})
	}
	for i, c := range pos {
		h.Buckets = append(h.Buckets, &model.HistogramBucket{Lower: model.FloatString(bound(i - 1)), Upper: model.FloatString(bound(i)), Count: model.FloatString(c)})
	}
	return h
}

func mustHistogram(t *testing.T, sh *model.SampleHistogram) *histogram {
	t.Helper()
	h, err := fromSampleHistogram(sh)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// spread is a deterministic long-tailed set of n TTFT-like values.
func spread(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		u := (float64(i) + 0.5) / float64(n)
		xs[(i*7919)%n] = 0.05 * math.Exp(1.2*math.Sqrt2*math.Erfinv(2*u-1))
	}
	return xs
}

func TestHistogramQuantileAgreesWithRecordsWithinBucket(t *testing.T) {
	datasets := map[string][]float64{
		"seed fresh A": samplesOf(seedFresh.records(nil), 0),
		"seed fresh B": samplesOf(seedFresh.records(nil), 1),
		"long tail":    spread(1000),
	}
	for name, xs := range datasets {
		exact := newSamples(xs)
		h := mustHistogram(t, nativeHistogram(4, xs...))
		if h.schema != 4 || h.count() != len(xs) {
			t.Fatalf("%s: schema %d, count %d; want 4, %d", name, h.schema, h.count(), len(xs))
		}
		for _, q := range []float64{0.5, 0.95, 0.99} {
			x := exact.quantile(q)
			i := int(math.Ceil(math.Log2(x) * 16))
			lo, hi := h.bound(i-1), h.bound(i)
			if got := h.quantile(q); got < lo || got > hi {
				t.Errorf("%s q=%g: histogram %g outside the bucket (%g, %g] of the exact %g", name, q, got, lo, hi, x)
			}
			ec, hc := exact.quantileCI(q, 0.95), h.quantileCI(q, 0.95)
			if hc[0] > ec[0] || hc[1] < ec[1] {
				t.Errorf("%s q=%g: histogram CI %v does not contain the exact CI %v", name, q, hc, ec)
			}
			if hc[1]/ec[1] > math.Exp2(1.0/16)+1e-9 || ec[0]/hc[0] > math.Exp2(1.0/16)+1e-9 {
				t.Errorf("%s q=%g: histogram CI %v wider than one bucket beyond the exact CI %v", name, q, hc, ec)
			}
		}
	}
}

func samplesOf(recs []record.Record, side int) []float64 {
	var xs []float64
	for i := side; i < len(recs); i += 2 {
		xs = append(xs, recs[i].TTFTSeconds)
	}
	return xs
}

func TestHistogramAddMergesLikeSum(t *testing.T) {
	a, b := spread(300), spread(500)[:200]
	union := append(slices.Clone(a), b...)

	same := mustHistogram(t, nativeHistogram(4, a...))
	same.add(mustHistogram(t, nativeHistogram(4, b...)))
	if got, want := same.buckets(), mustHistogram(t, nativeHistogram(4, union...)).buckets(); !equalBuckets(got, want) {
		t.Errorf("schema 4 + schema 4:\n got %v\nwant %v", got, want)
	}

	mixed := mustHistogram(t, nativeHistogram(4, a...))
	mixed.add(mustHistogram(t, nativeHistogram(2, b...)))
	if mixed.schema != 2 {
		t.Fatalf("schema after merging 4 and 2 = %d, want 2", mixed.schema)
	}
	if got, want := mixed.buckets(), mustHistogram(t, nativeHistogram(2, union...)).buckets(); !equalBuckets(got, want) {
		t.Errorf("schema 4 + schema 2:\n got %v\nwant %v", got, want)
	}
}

func equalBuckets(a, b []bucket) bool {
	return slices.EqualFunc(a, b, func(x, y bucket) bool {
		return math.Abs(x.lower-y.lower) <= 1e-12*math.Abs(x.lower) &&
			math.Abs(x.upper-y.upper) <= 1e-12*math.Abs(x.upper) && x.count == y.count
	})
}

func TestHistogramOfDifferences(t *testing.T) {
	diffs := []float64{-0.08, -0.03, -0.02, -0.02, 0, 0, 0.01, 0.05, 0.2, -0.5}
	h := mustHistogram(t, nativeHistogram(4, diffs...))
	if got := h.below(); got != 5 {
		t.Errorf("below zero = %g, want 5", got)
	}
	bs := h.buckets()
	if !slices.IsSortedFunc(bs, func(x, y bucket) int { return int(math.Copysign(1, x.lower-y.lower)) }) || bs[0].lower > -0.5 {
		t.Errorf("buckets not in ascending order from -0.5: %v", bs)
	}
	if got := h.quantile(0.6); got < -zeroThreshold || got > zeroThreshold {
		t.Errorf("q=0.6 = %g, want within the zero bucket", got)
	}
	if got := h.quantile(0.5); got > -0.02/math.Exp2(1.0/16) || got < -0.02*math.Exp2(1.0/16) {
		t.Errorf("median = %g, want within the bucket of -0.02", got)
	}
	if got := h.quantile(0.1); got > -0.5/math.Exp2(1.0/16) || got < -0.5*math.Exp2(1.0/16) {
		t.Errorf("q=0.1 = %g, want within the bucket of -0.5", got)
	}
}

func TestFromSampleHistogramRejectsCustomBuckets(t *testing.T) {
	sh := &model.SampleHistogram{Count: 1, Buckets: model.HistogramBuckets{{Lower: 0.5, Upper: 1e30, Count: 1}}}
	if _, err := fromSampleHistogram(sh); err == nil {
		t.Error("want an error for a bucket that is not exponential")
	}
}
