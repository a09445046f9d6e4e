package exporter

import (
	"iter"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kestrelops/tandem/exporter/nativehist"
)

// Gathered is what one Gather returned, read by metric name.
type Gathered map[string][]*dto.Metric

// Gather gathers g once.
func Gather(g prometheus.Gatherer) (Gathered, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := Gathered{}
	for _, mf := range mfs {
		out[mf.GetName()] = append(out[mf.GetName()], mf.GetMetric()...)
	}
	return out, nil
}

// Series lists the series of the metric name.
func (g Gathered) Series(name string) iter.Seq[Series] {
	return func(yield func(Series) bool) {
		for _, m := range g[name] {
			if !yield(Series{m}) {
				return
			}
		}
	}
}

// Series is one gathered series.
type Series struct{ m *dto.Metric }

// Label is the value of the label name, "" when the series has none.
func (s Series) Label(name string) string {
	for _, l := range s.m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Value is the value of a counter, a gauge or an untyped series.
func (s Series) Value() float64 {
	switch {
	case s.m.Counter != nil:
		return s.m.GetCounter().GetValue()
	case s.m.Gauge != nil:
		return s.m.GetGauge().GetValue()
	default:
		return s.m.GetUntyped().GetValue()
	}
}

// Histogram reads the native histogram of a histogram series.
func (s Series) Histogram() (*nativehist.Histogram, error) {
	return nativehist.FromProto(s.m.GetHistogram())
}
