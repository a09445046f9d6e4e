package report

import (
	"math"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/kestrelops/tandem/exporter/nativehist"
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

func mustHistogram(t *testing.T, sh *model.SampleHistogram) histogram {
	t.Helper()
	h, err := nativehist.FromSampleHistogram(sh)
	if err != nil {
		t.Fatal(err)
	}
	return histogram{h}
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
		if h.count() != len(xs) {
			t.Fatalf("%s: count %d, want %d", name, h.count(), len(xs))
		}
		for _, q := range []float64{0.5, 0.95, 0.99} {
			x := exact.quantile(q)
			i := int(math.Ceil(math.Log2(x) * 16))
			lo, hi := math.Exp2(float64(i-1)/16), math.Exp2(float64(i)/16)
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

func TestHistogramBelowZero(t *testing.T) {
	diffs := []float64{-0.08, -0.03, -0.02, -0.02, 0, 0, 0.01, 0.05, 0.2, -0.5}
	if got := mustHistogram(t, nativeHistogram(4, diffs...)).below(); got != 5 {
		t.Errorf("below zero = %g, want 5", got)
	}
}
