package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kestrelops/tandem/exporter/verdict"
)

// calibrationRuns is how many seeded experiments each row of the
// calibration table runs.
const calibrationRuns = 200

// simulatedPairs draws n pairs of TTFTs: a request effect both arms share
// (log-normal, median 150 ms, as prompt length and load make it) plus each
// arm's own noise (exponential, mean 30 ms), and B shifted by shift. The
// true difference of any quantile of B and A is then exactly shift.
func simulatedPairs(rng *rand.Rand, n int, shift float64) pairedSamples {
	p := pairedSamples{a: make([]float64, n), b: make([]float64, n), seed: rng.Uint64()}
	for i := range n {
		base := 0.150 * math.Exp(0.4*rng.NormFloat64())
		p.a[i] = base + 0.030*rng.ExpFloat64()
		p.b[i] = base + 0.030*rng.ExpFloat64() + shift
	}
	return p
}

type calibrationRow struct {
	pairs int
	q     float64
	// falseAlarm is the share of A/A runs read as slower or faster with the
	// default margin; excludesZero the share whose interval leaves out zero
	// (the false-alarm rate with no margin).
	falseAlarm, excludesZero float64
	// coverage is the share of runs with B shifted by 20 ms whose interval
	// holds 20 ms; power the share of those read as slower.
	coverage, power float64
}

// calibrate runs the A/A and known-shift experiments of the paired
// bootstrap at n pairs.
func calibrate(n int) []calibrationRow {
	qs := []float64{0.5, 0.95, 0.99}
	const shift = 0.020
	rows := make([]calibrationRow, len(qs))
	for i, q := range qs {
		rows[i] = calibrationRow{pairs: n, q: q}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	for range calibrationRuns {
		for i, d := range simulatedPairs(rng, n, 0).bootstrap(qs, verdict.Level) {
			switch verdict.Latency(d.ci[0], d.ci[1], verdict.Margin*d.a) {
			case verdict.Slower, verdict.Faster:
				rows[i].falseAlarm++
			}
			if !d.ci.includesZero() {
				rows[i].excludesZero++
			}
		}
		for i, d := range simulatedPairs(rng, n, shift).bootstrap(qs, verdict.Level) {
			if d.ci[0] <= shift && shift <= d.ci[1] {
				rows[i].coverage++
			}
			if verdict.Latency(d.ci[0], d.ci[1], verdict.Margin*d.a) == verdict.Slower {
				rows[i].power++
			}
		}
	}
	for i := range rows {
		rows[i].falseAlarm /= calibrationRuns
		rows[i].excludesZero /= calibrationRuns
		rows[i].coverage /= calibrationRuns
		rows[i].power /= calibrationRuns
	}
	return rows
}

// TestCalibration shows by seeded simulation that the paired bootstrap
// keeps its promises: in A/A runs slower or faster is read at most 5% of
// the time, and the interval of a known shift covers it at least 93% of the
// time. The table it logs is the one in the README.
func TestCalibration(t *testing.T) {
	var b strings.Builder
	b.WriteString("| pairs | quantile | A/A: slower or faster | A/A: interval leaves out 0 | shift +20 ms: coverage | shift +20 ms: slower |\n|---:|---|---:|---:|---:|---:|\n")
	sizes := []int{verdict.MinPairs, 500}
	if raceEnabled {
		sizes = sizes[:1] // the race detector slows the bootstrap several times over
	}
	for _, n := range sizes {
		for _, r := range calibrate(n) {
			fmt.Fprintf(&b, "| %d | p%g | %s | %s | %s | %s |\n", r.pairs, 100*r.q, percent(r.falseAlarm), percent(r.excludesZero), percent(r.coverage), percent(r.power))
			if r.q == 0.99 && n < 500 {
				continue // too few pairs above the p99 to promise anything
			}
			if r.falseAlarm > 0.05 {
				t.Errorf("%d pairs, p%g: A/A read as slower or faster in %s of runs, want at most 5%%", n, 100*r.q, percent(r.falseAlarm))
			}
			if r.coverage < 0.93 {
				t.Errorf("%d pairs, p%g: interval covered the known shift in %s of runs, want at least 93%%", n, 100*r.q, percent(r.coverage))
			}
		}
	}
	t.Logf("%d seeded runs per row:\n%s", calibrationRuns, b.String())
	if raceEnabled {
		return
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), b.String()) {
		t.Errorf("README.md lacks the calibration table; paste in:\n%s", b.String())
	}
}
