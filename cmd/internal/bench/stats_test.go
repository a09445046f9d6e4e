package bench

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		ds := make([]time.Duration, len(ns))
		for i, n := range ns {
			ds[i] = time.Duration(n) * time.Millisecond
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, c := range []struct {
		name string
		ds   []time.Duration
		q    float64
		want float64
	}{
		{"one sample", ms(7), 0.5, 0.007},
		{"median of odd count", ms(5, 1, 3), 0.5, 0.003},
		{"median of even count is the lower middle", ms(4, 1, 3, 2), 0.5, 0.002},
		{"p99 of 100", ms(hundred...), 0.99, 0.099},
		{"p50 of 100", ms(hundred...), 0.5, 0.050},
		{"p100 is the maximum", ms(2, 9, 4), 1, 0.009},
		{"a tiny quantile is the minimum", ms(2, 9, 4), 0.0001, 0.002},
	} {
		if got := percentile(c.ds, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: percentile(%v, %g) = %g, want %g", c.name, c.ds, c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("percentile of no samples = %g, want NaN", got)
	}
	in := ms(3, 1, 2)
	percentile(in, 0.5)
	if in[0] != 3*time.Millisecond || in[1] != time.Millisecond {
		t.Errorf("percentile reordered its input: %v", in)
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct {
		a, b, want float64
	}{
		{3, 2, 1.5},
		{-1, 4, -0.25},
		{0, 5, 0},
	} {
		if got := ratio(c.a, c.b); got != c.want {
			t.Errorf("ratio(%g, %g) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
	for _, c := range [][2]float64{{1, 0}, {math.NaN(), 1}, {1, math.NaN()}} {
		if got := ratio(c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("ratio(%g, %g) = %g, want NaN", c[0], c[1], got)
		}
	}
}

func TestPerUnit(t *testing.T) {
	if got := perUnit(10, 4); got != 2.5 {
		t.Errorf("perUnit(10, 4) = %g, want 2.5", got)
	}
	if got := perUnit(10, 0); !math.IsNaN(got) {
		t.Errorf("perUnit(10, 0) = %g, want NaN", got)
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and parentheses, as the kernel prints it.
	stat := "4242 (nginx: (worker) x) S 4241 4241 4241 0 -1 4194624 3177 0 0 0 250 130 0 0 20 0 1 0 8712 12910592 1184 18446744073709551615"
	st, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4241 {
		t.Errorf("ppid = %d, want 4241", st.ppid)
	}
	if want := 3800 * time.Millisecond; st.cpu != want {
		t.Errorf("cpu = %s, want %s (380 ticks)", st.cpu, want)
	}
	for _, bad := range []string{"", "4242 nginx S 1", "4242 (nginx) S 1 2 3", "4242 (nginx) S x 1 1 0 -1 0 0 0 0 0 1 1"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) did not fail", bad)
		}
	}
}

func TestSpread(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range vs {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	if got := spread([][]time.Duration{ms(1, 2, 3)}, 0.5); got != 0 {
		t.Errorf("one round: spread = %v, want 0", got)
	}
	got := spread([][]time.Duration{ms(1, 2, 3), ms(4, 5, 6), ms(2, 3, 4)}, 0.5)
	if math.Abs(got-0.003) > 1e-12 {
		t.Errorf("spread of medians 2, 5, 3 ms = %v s, want 0.003", got)
	}
}
