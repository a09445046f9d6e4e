package exporter_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/kestrelops/tandem/exporter"
)

// nativeHistogram observes values into a client_golang native histogram with
// tandem's settings and returns its protobuf form.
func nativeHistogram(t testing.TB, values ...float64) *dto.Histogram {
	t.Helper()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "test_seconds",
		Help:                            "test",
		NativeHistogramBucketFactor:     exporter.NativeHistogramBucketFactor,
		NativeHistogramMaxBucketNumber:  exporter.NativeHistogramMaxBucketNumber,
		NativeHistogramMinResetDuration: time.Hour,
	})
	for _, v := range values {
		h.Observe(v)
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

func lognormal(seed uint64, n int, mu, sigma float64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Exp(mu + sigma*r.NormFloat64())
	}
	return out
}

// exactQuantile is the nearest-rank quantile of values.
func exactQuantile(values []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(values))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func TestNativeQuantileIsCloseToExactQuantile(t *testing.T) {
	values := lognormal(42, 10_000, math.Log(0.25), 0.6)
	h := nativeHistogram(t, values...)
	if got := h.GetSchema(); got != 4 {
		t.Fatalf("schema = %d, want 4 for factor %v", got, exporter.NativeHistogramBucketFactor)
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		got, want := exporter.NativeQuantile(h, q), exactQuantile(values, q)
		if rel := math.Abs(got-want) / want; rel > 0.03 {
			t.Errorf("q%v = %v, exact %v: off by %.2f%%, want within 3%%", q, got, want, 100*rel)
		}
	}
}

func span(offset int32, length uint32) *dto.BucketSpan {
	return &dto.BucketSpan{Offset: proto.Int32(offset), Length: proto.Uint32(length)}
}

func TestNativeQuantileHandBuilt(t *testing.T) {
	// Schema 0: bucket 1 is (1,2], bucket 2 is (2,4], bucket 4 is (8,16].
	twoBuckets := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		ZeroThreshold: proto.Float64(0.001),
		PositiveSpan:  []*dto.BucketSpan{span(1, 2)},
		PositiveDelta: []int64{2, 0},
	}
	gapped := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		PositiveSpan:  []*dto.BucketSpan{span(1, 1), span(2, 1)},
		PositiveDelta: []int64{1, 2},
	}
	zeroAndPositive := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		ZeroThreshold: proto.Float64(0.001),
		ZeroCount:     proto.Uint64(2),
		PositiveSpan:  []*dto.BucketSpan{span(1, 1)},
		PositiveDelta: []int64{2},
	}
	zeroAndNegative := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		ZeroThreshold: proto.Float64(0.001),
		ZeroCount:     proto.Uint64(2),
		NegativeSpan:  []*dto.BucketSpan{span(1, 1)},
		NegativeDelta: []int64{2},
	}
	bothSides := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(6),
		ZeroThreshold: proto.Float64(0.5),
		ZeroCount:     proto.Uint64(2),
		NegativeSpan:  []*dto.BucketSpan{span(1, 1)},
		NegativeDelta: []int64{2},
		PositiveSpan:  []*dto.BucketSpan{span(1, 1)},
		PositiveDelta: []int64{2},
	}
	floatEncoded := &dto.Histogram{
		Schema:           proto.Int32(1),
		SampleCountFloat: proto.Float64(3),
		PositiveSpan:     []*dto.BucketSpan{span(2, 1)},
		PositiveCount:    []float64{3},
	}
	emptyNative := &dto.Histogram{
		Schema:       proto.Int32(4),
		SampleCount:  proto.Uint64(0),
		PositiveSpan: []*dto.BucketSpan{span(0, 0)},
	}
	classicOnly := &dto.Histogram{
		SampleCount: proto.Uint64(3),
		Bucket:      []*dto.Bucket{{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(3)}},
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		h    *dto.Histogram
		q    float64
		want float64
	}{
		{"first bucket upper edge", twoBuckets, 0.5, 2},
		{"inside second bucket", twoBuckets, 0.75, 3},
		{"max", twoBuckets, 1, 4},
		{"min rank falls in first bucket", twoBuckets, 0, 1},
		{"after a span gap", gapped, 0.5, 8 + 8*(1.0/3)},
		{"zero bucket, positive only: lower bound 0", zeroAndPositive, 0.25, 0.0005},
		{"zero bucket, negative only: upper bound 0", zeroAndNegative, 0.75, -0.001 + 0.001*(1.0/2)},
		{"negative bucket", zeroAndNegative, 0.25, -2 + 1*(1.0/2)},
		{"zero bucket, both sides: full width", bothSides, 0.5, -0.5 + 1*(1.0/2)},
		{"positive after zero bucket", bothSides, 0.75, 1 + 1*(0.5/2)},
		{"float counts, schema 1", floatEncoded, 0.5, math.Sqrt2 + (2-math.Sqrt2)*0.5},
		{"q below 0", twoBuckets, -0.1, math.Inf(-1)},
		{"q above 1", twoBuckets, 1.1, math.Inf(+1)},
		{"q NaN", twoBuckets, nan, nan},
		{"empty", emptyNative, 0.5, nan},
		{"classic only", classicOnly, 0.5, nan},
		{"nil", nil, 0.5, nan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exporter.NativeQuantile(tc.h, tc.q)
			if math.IsNaN(tc.want) {
				if !math.IsNaN(got) {
					t.Fatalf("got %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNativeQuantileNaNObservations(t *testing.T) {
	h := nativeHistogram(t, 1, 1, math.NaN(), math.NaN())
	got := exporter.NativeQuantile(h, 0.99)
	if math.IsNaN(got) || got < 1 {
		t.Fatalf("q0.99 with NaN observations = %v, want the upper bound of the last bucket (>= 1)", got)
	}
}

func TestMergeNativeEqualsOneHistogramOfAllValues(t *testing.T) {
	fast := lognormal(1, 3000, math.Log(0.05), 0.3)
	slow := lognormal(2, 1000, math.Log(0.8), 0.5)
	merged, err := exporter.MergeNative(nativeHistogram(t, fast...), nativeHistogram(t, slow...))
	if err != nil {
		t.Fatal(err)
	}
	all := nativeHistogram(t, append(slices.Clone(fast), slow...)...)
	assertSameBuckets(t, merged, all)
	for _, q := range []float64{0.5, 0.95, 0.99} {
		if got, want := exporter.NativeQuantile(merged, q), exporter.NativeQuantile(all, q); got != want {
			t.Errorf("q%v merged = %v, all = %v", q, got, want)
		}
	}
}

func assertSameBuckets(t *testing.T, got, want *dto.Histogram) {
	t.Helper()
	if got.GetSchema() != want.GetSchema() || got.GetSampleCount() != want.GetSampleCount() ||
		got.GetZeroCount() != want.GetZeroCount() || got.GetZeroThreshold() != want.GetZeroThreshold() {
		t.Fatalf("schema/count/zero = %d/%d/%d/%v, want %d/%d/%d/%v",
			got.GetSchema(), got.GetSampleCount(), got.GetZeroCount(), got.GetZeroThreshold(),
			want.GetSchema(), want.GetSampleCount(), want.GetZeroCount(), want.GetZeroThreshold())
	}
	if math.Abs(got.GetSampleSum()-want.GetSampleSum()) > 1e-9*math.Abs(want.GetSampleSum()) {
		t.Errorf("sum = %v, want %v", got.GetSampleSum(), want.GetSampleSum())
	}
	if g, w := bucketCounts(got.PositiveSpan, got.PositiveDelta), bucketCounts(want.PositiveSpan, want.PositiveDelta); !maps.Equal(g, w) {
		t.Errorf("positive buckets differ:\n got %v\nwant %v", g, w)
	}
	if g, w := bucketCounts(got.NegativeSpan, got.NegativeDelta), bucketCounts(want.NegativeSpan, want.NegativeDelta); !maps.Equal(g, w) {
		t.Errorf("negative buckets differ:\n got %v\nwant %v", g, w)
	}
}

// bucketCounts expands spans and deltas into the non-empty buckets by index.
func bucketCounts(spans []*dto.BucketSpan, deltas []int64) map[int]int64 {
	out := map[int]int64{}
	idx, pos, count := 0, 0, int64(0)
	for _, s := range spans {
		idx += int(s.GetOffset())
		for range s.GetLength() {
			count += deltas[pos]
			if count != 0 {
				out[idx] = count
			}
			idx++
			pos++
		}
	}
	return out
}

func TestMergeNativeNegativeValues(t *testing.T) {
	a := []float64{-0.3, -0.01, 0, 0.02, 0.4}
	b := []float64{-1.5, -0.3, 0.7, 0}
	merged, err := exporter.MergeNative(nativeHistogram(t, a...), nativeHistogram(t, b...))
	if err != nil {
		t.Fatal(err)
	}
	assertSameBuckets(t, merged, nativeHistogram(t, append(a, b...)...))
}

func TestMergeNativeReducesToCoarsestSchema(t *testing.T) {
	// Schema 1 buckets 1, 2, 3 are (1,√2], (√2,2], (2,2√2]; at schema 0 the
	// first two fall in bucket 1 (1,2], the third in bucket 2 (2,4].
	fine := &dto.Histogram{
		Schema:        proto.Int32(1),
		SampleCount:   proto.Uint64(7),
		SampleSum:     proto.Float64(10),
		PositiveSpan:  []*dto.BucketSpan{span(1, 3)},
		PositiveDelta: []int64{1, 1, 2}, // 1, 2, 4
	}
	coarse := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(3),
		SampleSum:     proto.Float64(4),
		PositiveSpan:  []*dto.BucketSpan{span(1, 1)},
		PositiveDelta: []int64{3},
	}
	got, err := exporter.MergeNative(fine, coarse)
	if err != nil {
		t.Fatal(err)
	}
	want := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(10),
		SampleSum:     proto.Float64(14),
		ZeroThreshold: proto.Float64(0),
		PositiveSpan:  []*dto.BucketSpan{span(1, 2)},
		PositiveDelta: []int64{6, -2}, // 6, 4
	}
	assertSameBuckets(t, got, want)
}

func TestMergeNativeWidensZeroBucket(t *testing.T) {
	wide := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(1),
		ZeroThreshold: proto.Float64(0.5),
		ZeroCount:     proto.Uint64(1),
		PositiveSpan:  []*dto.BucketSpan{span(0, 0)},
	}
	// Bucket -1 is (0.25,0.5], inside the wider zero bucket; bucket 2 is (2,4].
	narrow := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(3),
		ZeroThreshold: proto.Float64(0.001),
		PositiveSpan:  []*dto.BucketSpan{span(-1, 1), span(2, 1)},
		PositiveDelta: []int64{2, -1},
	}
	got, err := exporter.MergeNative(wide, narrow)
	if err != nil {
		t.Fatal(err)
	}
	want := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		ZeroThreshold: proto.Float64(0.5),
		ZeroCount:     proto.Uint64(3),
		PositiveSpan:  []*dto.BucketSpan{span(2, 1)},
		PositiveDelta: []int64{1},
	}
	assertSameBuckets(t, got, want)
}

func TestMergeNativeFloatEncoded(t *testing.T) {
	f := &dto.Histogram{
		Schema:           proto.Int32(0),
		SampleCountFloat: proto.Float64(1.5),
		PositiveSpan:     []*dto.BucketSpan{span(1, 1)},
		PositiveCount:    []float64{1.5},
	}
	i := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(2),
		PositiveSpan:  []*dto.BucketSpan{span(1, 1)},
		PositiveDelta: []int64{2},
	}
	got, err := exporter.MergeNative(f, i)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSampleCountFloat() != 3.5 || !slices.Equal(got.PositiveCount, []float64{3.5}) {
		t.Fatalf("merged = %v, want float count 3.5 in bucket 1", got)
	}
}

func TestMergeNativeErrors(t *testing.T) {
	if _, err := exporter.MergeNative(); err == nil {
		t.Error("merging nothing: no error")
	}
	if _, err := exporter.MergeNative(nil, nil); err == nil {
		t.Error("merging only nils: no error")
	}
	classic := &dto.Histogram{SampleCount: proto.Uint64(1), Bucket: []*dto.Bucket{{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(1)}}}
	if _, err := exporter.MergeNative(nativeHistogram(t, 1), classic); err == nil {
		t.Error("merging a classic histogram: no error")
	}
	broken := &dto.Histogram{Schema: proto.Int32(0), PositiveSpan: []*dto.BucketSpan{span(0, 2)}, PositiveDelta: []int64{1}}
	if _, err := exporter.MergeNative(broken); err == nil {
		t.Error("spans longer than buckets: no error")
	}
	h, err := exporter.MergeNative(nil, nativeHistogram(t))
	if err != nil {
		t.Fatal(err)
	}
	if q := exporter.NativeQuantile(h, 0.5); !math.IsNaN(q) {
		t.Errorf("quantile of merged empty histograms = %v, want NaN", q)
	}
}
