package nativehist_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
)

func ExampleHistogram_Quantile() {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "example_seconds",
		Help:                            "Example.",
		NativeHistogramBucketFactor:     exporter.NativeHistogramBucketFactor,
		NativeHistogramMaxBucketNumber:  exporter.NativeHistogramMaxBucketNumber,
		NativeHistogramMinResetDuration: time.Hour,
	})
	for i := 1; i <= 100; i++ {
		h.Observe(float64(i) / 100)
	}
	var m dto.Metric
	h.Write(&m)
	n, err := nativehist.FromProto(m.GetHistogram())
	if err != nil {
		panic(err)
	}

	// 0.95 lies in bucket (0.917, 0.958], which holds 0.92 to 0.95: rank
	// 95 is its last observation, so interpolation gives its upper bound.
	fmt.Printf("schema %d\n", m.GetHistogram().GetSchema())
	fmt.Printf("p50 %.3f\n", n.Quantile(0.5))
	fmt.Printf("p95 %.3f\n", n.Quantile(0.95))
	// Output:
	// schema 4
	// p50 0.500
	// p95 0.958
}

func ExampleSum() {
	observe := func(values ...float64) *nativehist.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:                        "example_seconds",
			Help:                        "Example.",
			NativeHistogramBucketFactor: exporter.NativeHistogramBucketFactor,
		})
		for _, v := range values {
			h.Observe(v)
		}
		var m dto.Metric
		h.Write(&m)
		n, err := nativehist.FromProto(m.GetHistogram())
		if err != nil {
			panic(err)
		}
		return n
	}
	var fast, slow []float64
	for range 90 {
		fast = append(fast, 0.1)
	}
	for range 10 {
		slow = append(slow, 2)
	}
	fastH, slowH := observe(fast...), observe(slow...)
	mixed := nativehist.Sum(fastH, slowH)
	average := (fastH.Quantile(0.95) + slowH.Quantile(0.95)) / 2
	fmt.Printf("mixed p95 %.2f s, average of the p95s %.2f s\n", mixed.Quantile(0.95), average)
	// Output:
	// mixed p95 1.96 s, average of the p95s 1.05 s
}
