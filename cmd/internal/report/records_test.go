package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
	"github.com/kestrelops/tandem/proxy/record"
)

func fromRecords(t *testing.T, recs []record.Record) *Report {
	t.Helper()
	r, err := FromRecords(recs, record.ReadStats{}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func render(t *testing.T, r *Report, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(&b, format); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// joined is text, or the lines of text joined by newlines.
func joined[T string | []string](text T) string {
	switch v := any(text).(type) {
	case []string:
		return strings.Join(v, "\n")
	case string:
		return v
	}
	return ""
}

func wantContains[T string | []string](t *testing.T, where string, lines T, wants ...string) {
	t.Helper()
	text := joined(lines)
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s does not contain %q:\n%s", where, w, text)
		}
	}
}

func wantNotContains[T string | []string](t *testing.T, where string, lines T, unwanted ...string) {
	t.Helper()
	text := joined(lines)
	for _, w := range unwanted {
		if strings.Contains(text, w) {
			t.Errorf("%s contains %q:\n%s", where, w, text)
		}
	}
}

// jsonReport is the stable JSON shape, decoded independently of the Go types.
type jsonReport struct {
	Classes []struct {
		Class string `json:"class"`
		Arms  map[string]struct {
			Completed        int        `json:"completed"`
			TTFTP95          float64    `json:"ttft_p95_seconds"`
			TTFTP95CI        [2]float64 `json:"ttft_p95_ci_seconds"`
			OutputRate       float64    `json:"output_tokens_per_second"`
			SteadyOutputRate float64    `json:"steady_output_tokens_per_second"`
			PerRequestP50    float64    `json:"per_request_output_tokens_per_second_p50"`
		} `json:"arms"`
		TTFTVerdict  string  `json:"ttft_p95_verdict"`
		RateVerdict  string  `json:"output_rate_verdict"`
		RateCase     string  `json:"output_rate_case"`
		SpeedVerdict string  `json:"per_request_speed_verdict"`
		TTFTDiff     float64 `json:"ttft_p95_difference_seconds"`
		Paired       struct {
			Pairs        int        `json:"pairs"`
			BFasterShare float64    `json:"b_faster_share"`
			BFasterCI    [2]float64 `json:"b_faster_share_ci"`
			Median       float64    `json:"median_difference_seconds"`
		} `json:"paired"`
	} `json:"classes"`
	Mixed struct {
		Class        string `json:"class"`
		TTFTVerdict  string `json:"ttft_p95_verdict"`
		RateVerdict  string `json:"output_rate_verdict"`
		SpeedVerdict string `json:"per_request_speed_verdict"`
		Withheld     string `json:"withheld"`
	} `json:"mixed"`
	Validity struct {
		CompletedParity bool     `json:"completed_parity"`
		TokenParity     bool     `json:"token_parity"`
		Warnings        []string `json:"warnings"`
	} `json:"validity"`
	Answer   []string `json:"answer"`
	Decision []string `json:"decision"`
	Because  []string `json:"because"`
	Change   []string `json:"what_would_change_it"`
}

func decodeJSON(t *testing.T, r *Report) jsonReport {
	t.Helper()
	var j jsonReport
	if err := json.Unmarshal([]byte(render(t, r, "json")), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestSeedQuestion(t *testing.T) {
	r := fromRecords(t, seedRecords())
	j := decodeJSON(t, r)

	type figures struct{ p95A, p95B, rateA, rateB, diff float64 }
	want := map[string]figures{
		exporter.ClassFresh:          {0.240, 0.320, 800, 920, 0.080},
		exporter.ClassRepeatedPrefix: {0.190, 0.170, 880, 1000, -0.020},
	}
	if len(j.Classes) != 2 || j.Classes[0].Class != exporter.ClassFresh || j.Classes[1].Class != exporter.ClassRepeatedPrefix {
		t.Fatalf("classes = %+v, want fresh then repeated_prefix", j.Classes)
	}
	for _, c := range j.Classes {
		w := want[c.Class]
		a, b := c.Arms[exporter.ConfigA], c.Arms[exporter.ConfigB]
		if !near(a.TTFTP95, w.p95A) || !near(b.TTFTP95, w.p95B) || !near(c.TTFTDiff, w.diff) {
			t.Errorf("%s: TTFT p95 A %g B %g diff %g, want %g %g %g", c.Class, a.TTFTP95, b.TTFTP95, c.TTFTDiff, w.p95A, w.p95B, w.diff)
		}
		if !near(a.OutputRate, w.rateA) || !near(b.OutputRate, w.rateB) {
			t.Errorf("%s: output rate A %g B %g, want %g %g", c.Class, a.OutputRate, b.OutputRate, w.rateA, w.rateB)
		}
		if a.Completed != 400 || b.Completed != 400 || c.Paired.Pairs != 400 || !near(c.Paired.Median, w.diff) {
			t.Errorf("%s: completed %d/%d, pairs %d, median %g", c.Class, a.Completed, b.Completed, c.Paired.Pairs, c.Paired.Median)
		}
		if c.RateVerdict != Higher || c.RateCase != OutputRateAFellBehind || c.SpeedVerdict != Higher {
			t.Errorf("%s: output rate verdict %q (%q), per-request speed verdict %q, want higher (a_fell_behind), higher", c.Class, c.RateVerdict, c.RateCase, c.SpeedVerdict)
		}
		if a, b := c.Arms[exporter.ConfigA].SteadyOutputRate, c.Arms[exporter.ConfigB].SteadyOutputRate; b <= a*(1+DefaultOptions().RateTolerance) {
			t.Errorf("%s: steady-state output rate A %g, B %g; want B higher beyond the tolerance: A fell behind", c.Class, a, b)
		}
	}
	if got := j.Classes[0].TTFTVerdict; got != Slower {
		t.Errorf("fresh TTFT p95 verdict = %q, want slower", got)
	}
	if got := j.Classes[1].TTFTVerdict; got != Faster {
		t.Errorf("repeated_prefix TTFT p95 verdict = %q, want faster", got)
	}
	if p := j.Classes[1].Paired; p.BFasterShare != 1 || math.Abs(p.BFasterCI[0]-0.9904877) > 1e-6 || p.BFasterCI[1] < 0.99999 {
		t.Errorf("repeated_prefix paired = %+v, want B faster in every pair", p)
	}
	if j.Mixed.Class != MixedClass || j.Mixed.TTFTVerdict != Invalid || j.Mixed.RateVerdict != Invalid || j.Mixed.SpeedVerdict != Invalid {
		t.Errorf("mixed = %+v, want invalid: the classes ran apart, so their merge is no mixed replay", j.Mixed)
	}
	for side, config := range exporter.Arms {
		merged := newSamples(append(samplesOf(seedFresh.records(nil), side), samplesOf(seedRepeated.records(nil), side)...))
		if got, want := float64(r.Mixed.Arms[config].TTFTP95Seconds), merged[759]; got != want {
			t.Errorf("mixed %s TTFT p95 = %g, want the 760th of 800 merged timings, %g", config, got, want)
		}
	}
	if !j.Validity.CompletedParity || !j.Validity.TokenParity {
		t.Errorf("validity = %+v, want both parities to hold", j.Validity)
	}
	if !r.Regressed() {
		t.Error("Regressed() = false; B's TTFT p95 is significantly worse on fresh prompts")
	}

	text := render(t, r, "text")
	wantContains(t, "text", text,
		"fresh: B raised the system output rate (920 vs 800 tokens/s, +15.0%",
		"B's TTFT p95 is slower by 80 ms (B 320 ms vs A 240 ms; 95% paired CI of B - A",
		"repeated_prefix: B raised the system output rate (1000 vs 880 tokens/s, +13.6%",
		"B's TTFT p95 is faster by 20 ms (B 170 ms vs A 190 ms; 95% paired CI of B - A",
		"All traffic: B raised the system output rate in every class",
		"TTFT p95 changes direction between classes (slower on fresh, faster on repeated_prefix), so no single TTFT p95 claim covers all traffic",
		"the classes ran in separate time spans",
		"A representative mixed replay",
	)
	wantNotContains(t, "text", text, "For the observed traffic mix", "All traffic: B's TTFT", "TTFT p95 was faster in every class", "TTFT p95 was slower in every class")
	wantContains(t, "JSON decision", j.Decision, "slower by 80 ms", "faster by 20 ms", "no single TTFT p95 claim covers all traffic")
	wantContains(t, "JSON answer", j.Answer,
		"fresh            TTFT p95  B slower: 320 ms vs A 240 ms, +33.3% [",
		"repeated_prefix  TTFT p95  B faster: 170 ms vs A 190 ms, -10.5% [",
		"mixed            TTFT p95  invalid: B 312 ms vs A 232 ms, not a representative mixed replay")
	wantContains(t, "JSON because", j.Because, "completed parity holds", "token parity holds", "A fell behind")
}

func TestWithheldClaims(t *testing.T) {
	small := seedFresh
	small.n = 50
	everyTenth := func(edit func(a, b *record.Record)) func(int, *record.Record, *record.Record) {
		return func(i int, a, b *record.Record) {
			if i%10 == 0 {
				edit(a, b)
			}
		}
	}
	for _, tc := range []struct {
		name                string
		recs                []record.Record
		ttft, rate, speed   string
		completed, tokens   bool
		decision, change    []string
		validityWarningPart string
	}{
		{
			name: "insufficient data",
			recs: append(small.records(nil), seedRepeated.records(nil)...),
			ttft: InsufficientData, rate: InsufficientData, speed: InsufficientData, completed: true, tokens: true,
			decision: []string{"fresh: no claim, because only 50 pairs completed on both arms, fewer than the 200 needed."},
			change:   []string{"150 more pairs of class fresh (at today's 0.208 pairs/s, about 12m0s)."},
		},
		{
			name: "token mismatch",
			recs: append(seedFresh.records(everyTenth(func(_, b *record.Record) { b.OutputTokens -= 40 })), seedRepeated.records(nil)...),
			ttft: Slower, rate: Invalid, speed: Invalid, completed: true, tokens: false,
			decision: []string{"fresh: B's TTFT p95 is slower by 80 ms", "no other claim, because output token counts differ in 40 of 400 pairs, so output rate and per-request speed are not compared like for like."},
			change:   []string{"Equal output token counts per pair in class fresh"},
		},
		{
			name: "unequal completion",
			recs: append(seedFresh.records(everyTenth(func(_, b *record.Record) { b.Outcome = exporter.OutcomeError })), seedRepeated.records(nil)...),
			ttft: Invalid, rate: Invalid, speed: Invalid, completed: false, tokens: true,
			decision: []string{"fresh: no claim, because the arms did not complete the same requests (A alone failed 0 and B alone failed 40 of 400 pairs)."},
			change:   []string{"A run of class fresh in which both arms complete the same requests."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fromRecords(t, tc.recs)
			j := decodeJSON(t, r)
			fresh := j.Classes[0]
			if fresh.TTFTVerdict != tc.ttft || fresh.RateVerdict != tc.rate || fresh.SpeedVerdict != tc.speed {
				t.Errorf("fresh verdicts TTFT %q, rate %q, speed %q; want %q, %q, %q", fresh.TTFTVerdict, fresh.RateVerdict, fresh.SpeedVerdict, tc.ttft, tc.rate, tc.speed)
			}
			if j.Classes[1].TTFTVerdict != Faster {
				t.Errorf("repeated_prefix TTFT verdict = %q, want faster: its data is sound", j.Classes[1].TTFTVerdict)
			}
			if j.Validity.CompletedParity != tc.completed || j.Validity.TokenParity != tc.tokens {
				t.Errorf("validity = %+v, want completed parity %v, token parity %v", j.Validity, tc.completed, tc.tokens)
			}
			wantContains(t, "decision", j.Decision, tc.decision...)
			wantContains(t, "what would change it", j.Change, tc.change...)
			wantContains(t, "warnings", strings.Join(j.Validity.Warnings, "\n"), "fresh: ")
			wantContains(t, "text", render(t, r, "text"), tc.decision...)
		})
	}
}

// interleaved is a mixed replay: both classes arrive in turn over the same
// span, and production saw them in the given numbers.
func interleaved(productionFresh, productionRepeated int) []record.Record {
	fresh := trace{class: exporter.ClassFresh, start: t0, n: 300, gap: time.Second, tokens: 300,
		p95: [2]float64{0.240, 0.320}, span: [2]float64{320, 320}}
	repeated := trace{class: exporter.ClassRepeatedPrefix, start: t0.Add(500 * time.Millisecond), n: 300, gap: time.Second, tokens: 300,
		p95: [2]float64{0.190, 0.170}, span: [2]float64{320, 320}}
	recs := append(fresh.records(nil), repeated.records(nil)...)
	for class, n := range map[string]int{exporter.ClassFresh: productionFresh, exporter.ClassRepeatedPrefix: productionRepeated} {
		for i := range n {
			recs = append(recs, record.Record{Start: t0.Add(time.Duration(i) * time.Second), Config: exporter.ConfigProduction, Class: class,
				Outcome: exporter.OutcomeCompleted, FirstToken: true, TTFTSeconds: 0.2, LastTokenSeconds: 5, DurationSeconds: 5, OutputTokens: 300})
		}
	}
	return recs
}

func TestRepresentativeMixedReplay(t *testing.T) {
	r := fromRecords(t, interleaved(3000, 3000))
	if r.Mixed.Withheld != "" || r.Mixed.TTFTP95Verdict == InsufficientData {
		t.Fatalf("mixed withheld %q, verdict %q; want a claim for this mix", r.Mixed.Withheld, r.Mixed.TTFTP95Verdict)
	}
	if got := float64(r.Validity.ClassMixDistance); got != 0 {
		t.Errorf("class mix distance = %g, want 0", got)
	}
	for _, c := range r.Classes {
		if c.OutputRateVerdict != Equivalent || c.OutputRateCase != "tie" {
			t.Errorf("%s: output rate %q (%q), want a tie: both arms kept up", c.Class, c.OutputRateVerdict, c.OutputRateCase)
		}
		if c.PerRequestSpeedVerdict != Equivalent {
			t.Errorf("%s: per-request speed %q, want equivalent: p50s differ by less than 2%%", c.Class, c.PerRequestSpeedVerdict)
		}
	}
	wantContains(t, "decision", r.Decision,
		"For the observed traffic mix (fresh 50.0%, repeated_prefix 50.0%): ",
		"system output rates tie",
		"so no capacity claim can be made",
		"This holds for this mix only: TTFT p95 changes direction between classes (slower on fresh, faster on repeated_prefix)",
	)
	wantContains(t, "what would change it", r.WhatWouldChangeIt, "A load at which one arm falls behind the arrivals")

	skewed := fromRecords(t, interleaved(5400, 600))
	if skewed.Mixed.TTFTP95Verdict != Invalid {
		t.Errorf("mixed verdict with a skewed production mix = %q, want invalid", skewed.Mixed.TTFTP95Verdict)
	}
	if got := float64(skewed.Validity.ClassMixDistance); !near(got, 0.4) {
		t.Errorf("class mix distance = %g, want 0.4", got)
	}
	wantContains(t, "decision", skewed.Decision, "the mirrored class mix is 40.0% away from production's")
}

func TestFromRecordsErrors(t *testing.T) {
	if _, err := FromRecords(nil, record.ReadStats{}, DefaultOptions()); err == nil || err.Error() != "no records" {
		t.Errorf("no records: err = %v", err)
	}
	recs := seedFresh.records(nil)
	recs[3].Config = "C"
	if _, err := FromRecords(recs, record.ReadStats{}, DefaultOptions()); err == nil || err.Error() != `record 4: unknown config "C"` {
		t.Errorf("unknown config: err = %v", err)
	}
}

// A difference the interval resolves but whose whole interval lies inside
// the margin is equivalent, and the report must not ask for more pairs.
func TestEquivalentInsideMargin(t *testing.T) {
	recs := seedFresh.records(func(i int, a, b *record.Record) {
		a.TTFTSeconds = 0.200 + float64(i)*1e-6
		b.TTFTSeconds = a.TTFTSeconds * 1.01
	})
	r := fromRecords(t, recs)
	j := decodeJSON(t, r)
	if v := j.Classes[0].TTFTVerdict; v != Equivalent {
		t.Fatalf("TTFT verdict = %q, want equivalent", v)
	}
	if ci := r.Classes[0].TTFTP95DifferenceCISeconds; ci.includesZero() {
		t.Fatalf("fixture: difference interval %v includes zero", ci)
	}
	wantContains(t, "decision", j.Decision, "TTFT p95 is equivalent (B 202 ms vs A 200 ms; 95% paired CI of B - A +", "inside the ±10 ms margin, 5.0% of A's)")
	wantContains(t, "answer", j.Answer, "fresh  TTFT p95  B equivalent (within ±5.0% of A): 202 ms vs A 200 ms, +1.0% [")
	wantNotContains(t, "what would change it", j.Change, "Class fresh, TTFT p95")
}

// An interval that holds zero and leaves the margin is inconclusive, with
// the smallest detectable change and the pairs that would settle it.
func TestInconclusiveSaysWhatWouldSettleIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := seedFresh.records(func(i int, a, b *record.Record) {
		base := 0.2 * math.Exp(0.3*rng.NormFloat64())
		a.TTFTSeconds = base + 0.05*rng.ExpFloat64()
		b.TTFTSeconds = base + 0.05*rng.ExpFloat64() + 0.004
	})
	r := fromRecords(t, recs)
	p95 := r.Classes[0].TTFT[1]
	if p95.Verdict != Inconclusive {
		t.Fatalf("TTFT p95 verdict = %q (%+v), want inconclusive", p95.Verdict, p95)
	}
	if p95.Method != MethodPaired || p95.MorePairs <= 0 || p95.MoreSeconds <= 0 || !(p95.MinimumDetectable > p95.Margin) {
		t.Errorf("p95 comparison %+v: want paired, more pairs and time, a detectable change above the margin", p95)
	}
	wantContains(t, "what would change it", r.WhatWouldChangeIt, "Class fresh, TTFT p95 (inconclusive: B - A ", "this run could detect a change of ±", fmt.Sprintf("about %d more pairs (at today's 1.67 pairs/s, about ", p95.MorePairs))
	wantContains(t, "answer", r.Answer, "fresh  TTFT p95  inconclusive: B ", "smallest detectable change ±")
}

// The same records give the same report: the bootstrap is seeded from the
// pair IDs.
func TestBootstrapDeterministic(t *testing.T) {
	comparisons := func() string {
		r := fromRecords(t, seedRecords())
		b, err := json.Marshal(append(r.Classes, r.Mixed))
		if err != nil {
			t.Fatal(err)
		}
		var cs []struct {
			TTFT  json.RawMessage `json:"ttft_seconds"`
			Speed json.RawMessage `json:"per_request_speed_p50"`
		}
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(cs)
		return string(out)
	}
	if a, b := comparisons(), comparisons(); a != b {
		t.Errorf("two reports of the same records compare differently:\n%s\n%s", a, b)
	}
}

// A token-count mismatch withholds only output-rate claims, for a class and
// for the mix alike.
func TestTokenMismatchKeepsMixTTFTClaim(t *testing.T) {
	recs := interleaved(3000, 3000)
	for i := range recs {
		if recs[i].Config == exporter.ConfigB && recs[i].Class == exporter.ClassFresh && i%20 == 1 {
			recs[i].OutputTokens -= 40
		}
	}
	r := fromRecords(t, recs)
	if r.Mixed.OutputRateVerdict != Invalid || !verdict.Conclusive(r.Mixed.TTFTP95Verdict) {
		t.Fatalf("mixed: rate %q, TTFT %q; want invalid and a TTFT claim", r.Mixed.OutputRateVerdict, r.Mixed.TTFTP95Verdict)
	}
	mix := r.Decision[len(r.Decision)-1]
	wantContains(t, "mix sentence", mix, "For the observed traffic mix", "TTFT p95", "no other claim, because output token counts differ")
	wantNotContains(t, "mix sentence", mix, "carry no claim of their own")
}

// TestSkippedShareFromRecords: production records say what became of the
// mirror; files older than that field leave the share unknown.
func TestSkippedShareFromRecords(t *testing.T) {
	old := fromRecords(t, interleaved(300, 300))
	if s := float64(old.Validity.SkippedShare); !math.IsNaN(s) {
		t.Errorf("skipped share without the mirror field = %g, want NaN", s)
	}

	recs := interleaved(300, 300)
	n := 0
	for i := range recs {
		if recs[i].Config != exporter.ConfigProduction {
			continue
		}
		switch n++; {
		case n <= 500:
			recs[i].Mirror = record.MirrorMirrored
		case n <= 560:
			recs[i].Mirror = record.Skipped(exporter.SkipOverloaded)
		case n <= 580:
			recs[i].Mirror = record.Skipped(exporter.SkipOverBudget)
		default:
			recs[i].Mirror = record.MirrorNotSampled
		}
	}
	r := fromRecords(t, recs)
	if got := float64(r.Validity.SkippedShare); !near(got, 60.0/560) {
		t.Errorf("skipped share = %g, want 60 overloaded of 560 sampled and not over budget", got)
	}
	wantContains(t, "because", r.Because, "10.7% of sampled requests were skipped because an arm was at its in-flight limit.")
}
