package nativehist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// TestSumAndQuantileArePromQLs serves histograms to Prometheus's PromQL
// engine and checks that Sum and Quantile give exactly what the PromQL
// engine gives for sum(h) and histogram_quantile(q, sum(h)): over
// different schemas, zero buckets of different widths (the wider absorbing
// the buckets of the narrower) and fractional counts, as increase() returns.
func TestSumAndQuantileArePromQLs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	values := func(n int, mu, sigma float64, negativeShare, zeroShare float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			switch u := r.Float64(); {
			case u < zeroShare:
			case u < zeroShare+negativeShare:
				out[i] = -math.Exp(mu + sigma*r.NormFloat64())
			default:
				out[i] = math.Exp(mu + sigma*r.NormFloat64())
			}
		}
		return out
	}
	type input struct {
		factor, zeroThreshold, scale float64
		values                       []float64
	}
	cases := map[string][]input{
		"tandem's TTFT histograms, two classes": {
			{values: values(1800, math.Log(0.08), 0.3, 0, 0)},
			{values: values(200, math.Log(1.2), 0.3, 0, 0)},
		},
		"schemas 4, 2 and 0": {
			{values: values(500, math.Log(0.2), 0.5, 0, 0)},
			{factor: 1.19, values: values(300, math.Log(0.3), 0.7, 0, 0)},
			{factor: 2, values: values(100, math.Log(0.5), 1, 0, 0)},
		},
		"differences with ties, zero buckets of different widths": {
			{values: values(400, math.Log(0.05), 1, 0.4, 0.05)},
			{zeroThreshold: 0.01, values: values(400, math.Log(0.02), 1, 0.5, 0.02)},
			{factor: 1.19, zeroThreshold: 0.003, values: values(100, math.Log(0.1), 1, 0.6, 0)},
		},
		"fractional counts": {
			{scale: 0.73, values: values(700, math.Log(0.1), 0.6, 0.1, 0.01)},
			{scale: 1.37, factor: 1.19, values: values(300, math.Log(0.4), 0.6, 0.1, 0.01)},
		},
		"one histogram": {
			{values: values(20, math.Log(0.1), 1, 0, 0)},
		},
	}
	qs := []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	t.Cleanup(func() { engine.Close() })
	for name, inputs := range cases {
		t.Run(name, func(t *testing.T) {
			var (
				hs     []*Histogram
				series []storage.Series
			)
			for i, in := range inputs {
				h, err := FromProto(gathered(t, in.factor, in.zeroThreshold, in.scale, in.values))
				if err != nil {
					t.Fatal(err)
				}
				hs = append(hs, h)
				series = append(series, storage.NewListSeries(
					labels.FromStrings(labels.MetricName, "h", "i", fmt.Sprint(i)),
					[]chunks.Sample{sample{h.fh.Copy()}}))
			}
			db := storage.QueryableFunc(func(int64, int64) (storage.Querier, error) {
				return &storage.MockQuerier{SelectMockFunction: func(bool, *storage.SelectHints, ...*labels.Matcher) storage.SeriesSet {
					return &seriesSet{series: series}
				}}, nil
			})
			sum := Sum(hs...)
			query := func(expr string) promql.Sample {
				t.Helper()
				q, err := engine.NewInstantQuery(t.Context(), db, nil, expr, time.Unix(0, 0))
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				res := q.Exec(t.Context())
				vec, err := res.Vector()
				if err != nil || len(vec) != 1 {
					t.Fatalf("%s: %v, %v", expr, vec, err)
				}
				return vec[0]
			}
			if got, want := sum.fh, query("sum(h)").H; !got.Equals(want) {
				t.Errorf("Sum = %s\nPromQL sum = %s", got.TestExpression(), want.TestExpression())
			}
			for _, q := range qs {
				got, want := sum.Quantile(q), query(fmt.Sprintf("histogram_quantile(%v, sum(h))", q)).F
				if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Errorf("q%v = %v, PromQL %v", q, got, want)
				}
			}
		})
	}
}

// gathered records values in a client_golang native histogram and returns
// it as gathered, its counts multiplied by scale when scale is not 0.
func gathered(t *testing.T, factor, zeroThreshold, scale float64, values []float64) *dto.Histogram {
	t.Helper()
	if factor == 0 {
		factor = 1.05
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "test_seconds",
		Help:                            "test",
		NativeHistogramBucketFactor:     factor,
		NativeHistogramZeroThreshold:    zeroThreshold,
		NativeHistogramMaxBucketNumber:  320,
		NativeHistogramMinResetDuration: time.Hour,
	})
	for _, v := range values {
		h.Observe(v)
	}
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	d := m.GetHistogram()
	if scale == 0 {
		return d
	}
	scaled := func(deltas []int64) []float64 {
		var out []float64
		var abs int64
		for _, delta := range deltas {
			abs += delta
			out = append(out, float64(abs)*scale)
		}
		return out
	}
	count, zero := float64(d.GetSampleCount())*scale, float64(d.GetZeroCount())*scale
	d.SampleCountFloat, d.ZeroCountFloat, d.SampleCount, d.ZeroCount = &count, &zero, nil, nil
	d.PositiveCount, d.PositiveDelta = scaled(d.PositiveDelta), nil
	d.NegativeCount, d.NegativeDelta = scaled(d.NegativeDelta), nil
	return d
}

// sample is a float histogram sample at time 0.
type sample struct{ fh *histogram.FloatHistogram }

func (sample) T() int64                        { return 0 }
func (sample) ST() int64                       { return 0 }
func (sample) F() float64                      { return 0 }
func (sample) H() *histogram.Histogram         { return nil }
func (s sample) FH() *histogram.FloatHistogram { return s.fh }
func (sample) Type() chunkenc.ValueType        { return chunkenc.ValFloatHistogram }
func (s sample) Copy() chunks.Sample           { return sample{s.fh.Copy()} }

// seriesSet serves series in order, as a storage.Querier's Select does.
type seriesSet struct {
	series []storage.Series
	next   int
}

func (s *seriesSet) Next() bool                        { s.next++; return s.next <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.next-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
