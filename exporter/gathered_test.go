package exporter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kestrelops/tandem/exporter"
)

func TestGathered(t *testing.T) {
	reg, m := newMetrics(t)
	m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 10))
	m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(300*time.Millisecond, 5))
	m.ShadowInFlight(exporter.ConfigB).Add(3)
	reg.MustRegister(prometheus.NewUntypedFunc(prometheus.UntypedOpts{Name: "test_untyped", Help: "test"}, func() float64 { return 7 }))

	g, err := exporter.Gather(reg)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for s := range g.Series(exporter.MetricOutputTokens) {
		values[s.Label(exporter.LabelConfig)+"/"+s.Label(exporter.LabelClass)] += s.Value()
	}
	if got := values[exporter.ConfigA+"/"+exporter.ClassFresh]; got != 15 {
		t.Errorf("A/fresh output tokens = %v, want 15 (counter)", got)
	}
	var inFlight float64
	for s := range g.Series(exporter.MetricShadowInFlight) {
		inFlight += s.Value()
	}
	if inFlight != 3 {
		t.Errorf("in flight = %v, want 3 (gauge)", inFlight)
	}
	for s := range g.Series("test_untyped") {
		if s.Value() != 7 || s.Label("absent") != "" {
			t.Errorf("untyped value %v, absent label %q; want 7 and empty", s.Value(), s.Label("absent"))
		}
	}
	n := 0
	for s := range g.Series(exporter.MetricTimeToFirstToken) {
		if s.Label(exporter.LabelConfig) != exporter.ConfigA || s.Label(exporter.LabelClass) != exporter.ClassFresh {
			continue
		}
		h, err := s.Histogram()
		if err != nil {
			t.Fatal(err)
		}
		n++
		if h.Count() != 2 {
			t.Errorf("TTFT count = %v, want 2", h.Count())
		}
	}
	if n != 1 {
		t.Errorf("%d TTFT series of A/fresh, want 1", n)
	}
	for s := range g.Series(exporter.MetricRequests) {
		if _, err := s.Histogram(); err == nil {
			t.Error("a counter read as a histogram: no error")
		}
		break
	}

	failing := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("broken") })
	if _, err := exporter.Gather(failing); err == nil {
		t.Error("a failing Gatherer: no error")
	}
}
