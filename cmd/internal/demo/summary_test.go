package demo

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
)

// mirrored is n requests every 100 ms, each on A and B at the same moment,
// 200 output tokens each; response i of an arm (0 for A) lasts
// duration(side, i) seconds.
func mirrored(n int, duration func(side, i int) float64) []record.Record {
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	var out []record.Record
	for i := range n {
		for side, config := range exporter.Arms {
			d := duration(side, i)
			out = append(out, record.Record{
				Start: t0.Add(time.Duration(i) * 100 * time.Millisecond), Config: config, Class: exporter.ClassFresh,
				PairID: fmt.Sprint(i), Outcome: exporter.OutcomeCompleted, FirstToken: true,
				TTFTSeconds: 0.2, LastTokenSeconds: d - 0.1, DurationSeconds: d, OutputTokens: 200,
			})
		}
	}
	return out
}

func TestRateSituation(t *testing.T) {
	keptUp := func(side, _ int) float64 { return [2]float64{8.3, 4.3}[side] }
	for _, tc := range []struct {
		name     string
		recs     []record.Record
		rateCase string
		want     string
	}{
		{"both kept up", mirrored(600, keptUp), report.OutputRateTie,
			"A delivered 2000 tok/s and B 2000 tok/s: they tie, so both arms kept up"},
		{"A fell behind", mirrored(600, func(side, i int) float64 { return 4.3 + float64(1-side)*0.02*float64(i) }), report.OutputRateAFellBehind,
			"A fell behind the arrivals (its backlog grew)"},
		{"too short", mirrored(100, keptUp), report.OutputRateTooShort,
			"Too short to judge capacity: the steady-state window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := report.FromRecords(tc.recs, record.ReadStats{}, report.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			s := Summarize(rep)
			if s.OutputRateCase != tc.rateCase {
				t.Errorf("output rate case = %q, want %q", s.OutputRateCase, tc.rateCase)
			}
			var b strings.Builder
			s.WriteText(&b)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("summary does not contain %q:\n%s", tc.want, b.String())
			}
			a, bb := s.Classes[Mixed][exporter.ConfigA].OutputRate, s.Classes[Mixed][exporter.ConfigB].OutputRate
			if tc.rateCase == report.OutputRateTie && math.Abs(bb/a-1) <= 0.02 {
				t.Errorf("system output rates A %g, B %g tie; the fixture must show the drain bias", a, bb)
			}
		})
	}
}

// The summary labels the class-average p95 as the wrong number, and an
// interrupted run says its arms' request sets are unmatched.
func TestSummaryText(t *testing.T) {
	rep, err := report.FromRecords(mirrored(600, func(side, _ int) float64 { return [2]float64{8.3, 4.3}[side] }), record.ReadStats{}, report.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(rep)
	var b strings.Builder
	s.WriteText(&b)
	for _, want := range []string{"from the merged distribution of all requests (the right number); WRONG: ", "ms, the average of the class p95s, is the p95 of no traffic"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "unmatched") {
		t.Errorf("a complete run's summary says unmatched:\n%s", b.String())
	}
	s.Interrupted = true
	b.Reset()
	s.WriteText(&b)
	if !strings.Contains(b.String(), "the arms' request sets are unmatched") {
		t.Errorf("an interrupted run's summary does not say the request sets are unmatched:\n%s", b.String())
	}
}
