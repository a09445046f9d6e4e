package demo

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kestrelops/tandem/exporter"
)

func TestWaitForShadows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drained  time.Duration // when the last shadow ends; 0: never
		canceled time.Duration // when ctx ends; 0: never
		want     time.Duration
	}{
		// The drain falls between two 100 ms polls: a drain on a poll's
		// instant would race the ticker and make the result depend on
		// which of two simultaneous timers Go runs first.
		{"until drained", 1450 * time.Millisecond, 0, 1500 * time.Millisecond},
		{"at most the limit", 0, 0, 30 * time.Second},
		{"not after Ctrl-C", 0, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: exporter.MetricShadowInFlight, Help: "in flight"})
				reg.MustRegister(g)
				g.Set(1)
				if tc.drained > 0 {
					time.AfterFunc(tc.drained, func() { g.Set(0) })
				}
				ctx := t.Context()
				if tc.canceled > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.canceled)
					defer cancel()
				}
				start := time.Now()
				waitForShadows(ctx, reg, 30*time.Second)
				if got := time.Since(start); got != tc.want {
					t.Errorf("returned after %v, want %v", got, tc.want)
				}
			})
		})
	}
}
