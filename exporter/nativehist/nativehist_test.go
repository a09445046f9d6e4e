package nativehist_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
)

// observe records values in a client_golang native histogram with tandem's
// settings, or with the bucket factor given, and returns it as gathered.
func observe(t testing.TB, factor float64, values ...float64) *dto.Histogram {
	t.Helper()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "test_seconds",
		Help:                            "test",
		NativeHistogramBucketFactor:     cmp.Or(factor, exporter.NativeHistogramBucketFactor),
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

func mustProto(t testing.TB, h *dto.Histogram) *nativehist.Histogram {
	t.Helper()
	n, err := nativehist.FromProto(h)
	if err != nil {
		t.Fatal(err)
	}
	return n
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

func TestQuantileIsCloseToExactQuantile(t *testing.T) {
	values := lognormal(42, 10_000, math.Log(0.25), 0.6)
	h := observe(t, 0, values...)
	if got := h.GetSchema(); got != 4 {
		t.Fatalf("schema = %d, want 4 for factor %v", got, exporter.NativeHistogramBucketFactor)
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		got, want := mustProto(t, h).Quantile(q), exactQuantile(values, q)
		if rel := math.Abs(got-want) / want; rel > 0.03 {
			t.Errorf("q%v = %v, exact %v: off by %.2f%%, want within 3%%", q, got, want, 100*rel)
		}
	}
}

func span(offset int32, length uint32) *dto.BucketSpan {
	return &dto.BucketSpan{Offset: proto.Int32(offset), Length: proto.Uint32(length)}
}

// TestQuantileHandBuilt pins histogram_quantile's rules on small
// histograms: interpolation is exponential within exponential buckets and
// linear within the zero bucket, and ranks at q ≥ 0.5 are counted from the
// top.
func TestQuantileHandBuilt(t *testing.T) {
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
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		h    *dto.Histogram
		q    float64
		want float64
	}{
		{"first bucket upper edge", twoBuckets, 0.5, 2},
		{"inside second bucket", twoBuckets, 0.75, math.Exp2(1.5)},
		{"max", twoBuckets, 1, 4},
		{"min rank falls in first bucket", twoBuckets, 0, 1},
		{"after a span gap", gapped, 0.5, math.Exp2(3 + 1.0/3)},
		{"zero bucket, positive only: lower bound 0", zeroAndPositive, 0.25, 0.0005},
		{"zero bucket, negative only: upper bound 0", zeroAndNegative, 0.75, -0.0005},
		{"negative bucket", zeroAndNegative, 0.25, -math.Sqrt2},
		{"zero bucket, both sides: full width", bothSides, 0.5, 0},
		{"positive after zero bucket", bothSides, 0.75, math.Exp2(0.25)},
		{"float counts, schema 1", floatEncoded, 0.5, math.Exp2(0.75)},
		{"q below 0", twoBuckets, -0.1, math.Inf(-1)},
		{"q above 1", twoBuckets, 1.1, math.Inf(+1)},
		{"q NaN", twoBuckets, nan, nan},
		{"empty", emptyNative, 0.5, nan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustProto(t, tc.h).Quantile(tc.q)
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
	var none *nativehist.Histogram
	if got := none.Quantile(0.5); !math.IsNaN(got) || none.Count() != 0 {
		t.Errorf("nil histogram: quantile %v, count %v; want NaN and 0", got, none.Count())
	}
}

func TestQuantileNaNObservations(t *testing.T) {
	h := mustProto(t, observe(t, 0, 1, 1, math.NaN(), math.NaN()))
	if got := h.Quantile(0.25); got < 1/1.05 || got > 1 {
		t.Errorf("q0.25 = %v, want within the bucket of 1", got)
	}
	if got := h.Quantile(0.99); !math.IsNaN(got) {
		t.Errorf("q0.99 above every observation but NaNs = %v, want NaN", got)
	}
}

func TestFromProtoErrors(t *testing.T) {
	for name, h := range map[string]*dto.Histogram{
		"nil":                       nil,
		"classic":                   {SampleCount: proto.Uint64(3), Bucket: []*dto.Bucket{{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(3)}}},
		"spans longer than buckets": {Schema: proto.Int32(0), PositiveSpan: []*dto.BucketSpan{span(0, 2)}, PositiveDelta: []int64{1}},
		"negative count":            {Schema: proto.Int32(0), PositiveSpan: []*dto.BucketSpan{span(0, 2)}, PositiveDelta: []int64{1, -2}},
		"schema out of range":       {Schema: proto.Int32(9), PositiveSpan: []*dto.BucketSpan{span(0, 0)}},
		"integer and float counts": {
			Schema: proto.Int32(0), PositiveSpan: []*dto.BucketSpan{span(0, 1)}, PositiveDelta: []int64{1},
			NegativeSpan: []*dto.BucketSpan{span(0, 1)}, NegativeCount: []float64{1},
		},
	} {
		if _, err := nativehist.FromProto(h); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// buckets lists h's buckets as (lower, upper, count) triples.
func buckets(h *nativehist.Histogram) [][3]float64 {
	var out [][3]float64
	for b := range h.Buckets() {
		out = append(out, [3]float64{b.Lower, b.Upper, b.Count})
	}
	return out
}

func assertSameBuckets(t *testing.T, got, want *nativehist.Histogram) {
	t.Helper()
	if got.Count() != want.Count() {
		t.Errorf("count = %v, want %v", got.Count(), want.Count())
	}
	if g, w := buckets(got), buckets(want); !slices.Equal(g, w) {
		t.Errorf("buckets differ:\n got %v\nwant %v", g, w)
	}
}

func TestSumEqualsOneHistogramOfAllValues(t *testing.T) {
	fast := lognormal(1, 3000, math.Log(0.05), 0.3)
	slow := lognormal(2, 1000, math.Log(0.8), 0.5)
	sum := nativehist.Sum(mustProto(t, observe(t, 0, fast...)), mustProto(t, observe(t, 0, slow...)))
	all := mustProto(t, observe(t, 0, append(slices.Clone(fast), slow...)...))
	assertSameBuckets(t, sum, all)
	for _, q := range []float64{0.5, 0.95, 0.99} {
		if got, want := sum.Quantile(q), all.Quantile(q); got != want {
			t.Errorf("q%v of the sum = %v, of all values = %v", q, got, want)
		}
	}
}

func TestSumNegativeValues(t *testing.T) {
	a := []float64{-0.3, -0.01, 0, 0.02, 0.4}
	b := []float64{-1.5, -0.3, 0.7, 0}
	sum := nativehist.Sum(mustProto(t, observe(t, 0, a...)), mustProto(t, observe(t, 0, b...)))
	assertSameBuckets(t, sum, mustProto(t, observe(t, 0, append(a, b...)...)))
}

func TestSumReducesToCoarsestSchema(t *testing.T) {
	// Schema 1 buckets 1, 2, 3 are (1,√2], (√2,2], (2,2√2]; at schema 0 the
	// first two fall in bucket 1 (1,2], the third in bucket 2 (2,4].
	fine := &dto.Histogram{
		Schema:        proto.Int32(1),
		SampleCount:   proto.Uint64(7),
		PositiveSpan:  []*dto.BucketSpan{span(1, 3)},
		PositiveDelta: []int64{1, 1, 2}, // 1, 2, 4
	}
	coarse := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(3),
		PositiveSpan:  []*dto.BucketSpan{span(1, 1)},
		PositiveDelta: []int64{3},
	}
	want := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(10),
		PositiveSpan:  []*dto.BucketSpan{span(1, 2)},
		PositiveDelta: []int64{6, -2}, // 6, 4
	}
	assertSameBuckets(t, nativehist.Sum(mustProto(t, fine), mustProto(t, coarse)), mustProto(t, want))
	assertSameBuckets(t, mustProto(t, fine).Reduce(0), mustProto(t, &dto.Histogram{
		Schema: proto.Int32(0), SampleCount: proto.Uint64(7), PositiveSpan: []*dto.BucketSpan{span(1, 2)}, PositiveDelta: []int64{3, 1},
	}))
	if got := mustProto(t, coarse).Reduce(1); !slices.Equal(buckets(got), buckets(mustProto(t, coarse))) {
		t.Errorf("Reduce to a finer schema changed the buckets: %v", buckets(got))
	}
}

func TestSumWidensZeroBucket(t *testing.T) {
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
	want := &dto.Histogram{
		Schema:        proto.Int32(0),
		SampleCount:   proto.Uint64(4),
		ZeroThreshold: proto.Float64(0.5),
		ZeroCount:     proto.Uint64(3),
		PositiveSpan:  []*dto.BucketSpan{span(2, 1)},
		PositiveDelta: []int64{1},
	}
	assertSameBuckets(t, nativehist.Sum(mustProto(t, wide), mustProto(t, narrow)), mustProto(t, want))
	assertSameBuckets(t, nativehist.Sum(mustProto(t, narrow), mustProto(t, wide)), mustProto(t, want))
}

func TestSumFloatEncoded(t *testing.T) {
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
	if got := buckets(nativehist.Sum(mustProto(t, f), mustProto(t, i))); !slices.Equal(got, [][3]float64{{1, 2, 3.5}}) {
		t.Fatalf("sum = %v, want 3.5 in bucket (1,2]", got)
	}
}

func TestSumOfNothing(t *testing.T) {
	if nativehist.Sum() != nil || nativehist.Sum(nil, nil) != nil {
		t.Error("the sum of no histograms is not nil")
	}
	h := nativehist.Sum(nil, mustProto(t, observe(t, 0)))
	if h == nil || h.Count() != 0 || !math.IsNaN(h.Quantile(0.5)) {
		t.Errorf("sum of an empty histogram = %v, want an empty histogram", buckets(h))
	}
}

// sampleHistogram is h as the Prometheus HTTP API returns it.
func sampleHistogram(h *nativehist.Histogram) *model.SampleHistogram {
	sh := &model.SampleHistogram{Count: model.FloatString(h.Count())}
	for b := range h.Buckets() {
		sh.Buckets = append(sh.Buckets, &model.HistogramBucket{Lower: model.FloatString(b.Lower), Upper: model.FloatString(b.Upper), Count: model.FloatString(b.Count)})
	}
	return sh
}

func TestFromSampleHistogramReadsWhatTheAPIReturns(t *testing.T) {
	diffs := append(lognormal(3, 500, math.Log(0.05), 0.8), -0.08, -0.03, -0.02, -0.02, 0, 0, -0.5)
	for name, h := range map[string]*dto.Histogram{
		"schema 4":         observe(t, 0, lognormal(4, 1000, math.Log(0.2), 0.5)...),
		"schema 2":         observe(t, 1.19, lognormal(5, 1000, math.Log(0.2), 0.5)...),
		"differences":      observe(t, 0, diffs...),
		"empty":            observe(t, 0),
		"schema -1, zeros": observe(t, 4, 0, 0, 3, 100, -7),
	} {
		want := mustProto(t, h)
		got, err := nativehist.FromSampleHistogram(sampleHistogram(want))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if g, w := buckets(got), buckets(want); !slices.Equal(g, w) {
			t.Errorf("%s: buckets\n got %v\nwant %v", name, g, w)
		}
		for _, q := range []float64{0.1, 0.5, 0.95} {
			if g, w := got.Quantile(q), want.Quantile(q); g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Errorf("%s: q%v = %v, want %v", name, q, g, w)
			}
		}
	}
}

func TestSumOfDifferentSchemasFromSampleHistograms(t *testing.T) {
	a, b := lognormal(6, 300, math.Log(0.1), 0.7), lognormal(7, 200, math.Log(0.3), 0.4)
	fromAPI := func(factor float64, xs ...float64) *nativehist.Histogram {
		h, err := nativehist.FromSampleHistogram(sampleHistogram(mustProto(t, observe(t, factor, xs...))))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	assertSameBuckets(t, nativehist.Sum(fromAPI(0, a...), fromAPI(1.19, b...)), fromAPI(1.19, append(a, b...)...))
}

func TestFromSampleHistogramRejectsCustomBuckets(t *testing.T) {
	sh := &model.SampleHistogram{Count: 1, Buckets: model.HistogramBuckets{{Lower: 0.5, Upper: 1e30, Count: 1}}}
	if _, err := nativehist.FromSampleHistogram(sh); err == nil {
		t.Error("want an error for a bucket that is not exponential")
	}
}

func TestBucketsAscending(t *testing.T) {
	diffs := []float64{-0.08, -0.03, -0.02, -0.02, 0, 0, 0.01, 0.05, 0.2, -0.5}
	h := mustProto(t, observe(t, 0, diffs...))
	bs := buckets(h)
	if !slices.IsSortedFunc(bs, func(x, y [3]float64) int { return int(math.Copysign(1, x[0]-y[0])) }) || bs[0][0] > -0.5 {
		t.Errorf("buckets not in ascending order from -0.5: %v", bs)
	}
	if got := h.Quantile(0.6); got < -1e-38 || got > 1e-38 {
		t.Errorf("q=0.6 = %g, want within the zero bucket", got)
	}
	if got := h.Quantile(0.1); got > -0.5/1.05 || got < -0.5*1.05 {
		t.Errorf("q=0.1 = %g, want within the bucket of -0.5", got)
	}
}
