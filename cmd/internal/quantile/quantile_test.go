package quantile_test

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

func TestOf(t *testing.T) {
	data := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q, want float64
	}{{0, 1}, {0.1, 1}, {0.11, 2}, {0.5, 5}, {0.51, 6}, {0.9, 9}, {0.95, 10}, {0.99, 10}, {1, 10}} {
		if got := quantile.Of(data, tc.q); got != tc.want {
			t.Errorf("Of(1..10, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile.Of([]float64{7}, 0.95); got != 7 {
		t.Errorf("Of one value = %v", got)
	}
	if got := quantile.Of(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Of nothing = %v, want NaN", got)
	}
}

func TestRankIgnoresFloatingPointDust(t *testing.T) {
	// 0.07·100 is 7.000000000000001 in floating point.
	if got := quantile.Rank(100, 0.07); got != 7 {
		t.Errorf("Rank(100, 0.07) = %d, want 7", got)
	}
	for n := 1; n <= 5000; n++ {
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
			r := quantile.Rank(n, q)
			// The smallest rank with at least q of n values at or below it.
			if float64(r) < q*float64(n)-1e-6 || (r > 1 && float64(r-1) >= q*float64(n)+1e-6) {
				t.Fatalf("Rank(%d, %v) = %d", n, q, r)
			}
		}
	}
}

func ExampleOf() {
	ttfts := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 2.0}
	fmt.Println(quantile.Of(ttfts, 0.5), quantile.Of(ttfts, 0.95))
	// Output: 0.5 2
}

func TestSamplesOf(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	completed := func(ttft, last time.Duration, tokens int) exporter.Observation {
		return exporter.Observation{Outcome: exporter.OutcomeCompleted, FirstToken: true, TTFT: ttft, LastToken: last, Duration: last, OutputTokens: tokens}
	}
	s := quantile.SamplesOf([]exporter.Observation{
		completed(ms(300), ms(1300), 11),
		completed(ms(100), ms(600), 11),
		completed(ms(200), ms(200), 1),                        // one token: no ITL, no speed
		{Outcome: exporter.OutcomeCompleted, OutputTokens: 4}, // no first token
		{Outcome: exporter.OutcomeError, FirstToken: true, TTFT: ms(50), LastToken: ms(90), OutputTokens: 5}, // left out
	}, func(o exporter.Observation) exporter.Observation { return o })
	want := quantile.Samples{
		Completed: 4, OutputTokens: 27,
		TTFT:  []float64{0.1, 0.2, 0.3},
		ITL:   []float64{0.05, 0.1},
		Speed: []float64{10, 20},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("SamplesOf = %+v, want %+v", s, want)
	}
}
