package report

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
	"github.com/kestrelops/tandem/exporter/promql"
)

// Experiment selects one tandem deployment among those a Prometheus scrapes
// by its identity labels (promql.Identity). An empty field matches any value
// of its label, including none.
type Experiment struct {
	Job, Namespace, Name string
}

// FromPrometheus compares A and B on the increase of tandem's histograms and
// counters over the window ending at end, for the one experiment that sel
// selects; when sel matches several, the error names them. Replicas
// (instances) of the experiment are summed. Quantiles and their intervals
// are read from native histogram buckets; the mix merges the class
// histograms bucket by bucket, as PromQL's sum does.
func FromPrometheus(ctx context.Context, api v1.API, window time.Duration, end time.Time, sel Experiment, o Options) (*Report, error) {
	if window <= 0 {
		return nil, fmt.Errorf("window must be positive, got %s", window)
	}
	q := &querier{ctx: ctx, api: api, end: end, window: model.Duration(window).String()}
	if err := q.selectExperiment(sel); err != nil {
		return nil, err
	}
	byClass := []string{exporter.LabelClass}
	ttft := q.histograms(exporter.MetricTimeToFirstToken, promql.ByConfigClass, promql.Arms)
	itl := q.histograms(exporter.MetricInterTokenLatency, promql.ByConfigClass, promql.Arms)
	diffs := q.histograms(exporter.MetricTTFTDifference, byClass)
	tokens := q.values(exporter.MetricOutputTokens, promql.ByConfigClass, promql.Arms)
	completed := q.values(exporter.MetricRequests, promql.ByConfigClass, promql.Arms, promql.Eq(exporter.LabelOutcome, exporter.OutcomeCompleted))
	production := q.values(exporter.MetricRequests, byClass, promql.Production)
	pairs := q.values(exporter.MetricPairs, []string{exporter.LabelClass, exporter.LabelResult})
	mismatches := q.values(exporter.MetricPairOutputTokensMismatch, byClass)
	skipped := q.values(exporter.MetricMirrorSkipped, nil, promql.Eq(exporter.LabelReason, exporter.SkipOverloaded))
	busy := q.schedulingLatencyP99()
	if q.err != nil {
		return nil, q.err
	}

	classSet, seen := map[string]bool{}, 0.0
	for _, m := range []map[key]float64{pairs, completed} {
		for k, v := range m {
			classSet[k.class] = true
			seen += v
		}
	}
	if seen == 0 {
		return nil, fmt.Errorf("no mirrored traffic in the %s before %s", q.window, end.Format(time.RFC3339))
	}

	ev := evidence{
		source:       "prometheus",
		window:       Window{Start: end.Add(-window), End: end},
		skippedShare: math.NaN(),
		warnings:     q.warnings,
	}
	if busy > busySchedulingLatency.Seconds() {
		ev.warnings = append(ev.warnings, fmt.Sprintf(
			"tandem itself was busy: its goroutines waited %s at p99 to run (go_sched_latencies_seconds), so timings may be late by that much",
			time.Duration(busy*float64(time.Second)).Round(10*time.Microsecond)))
	}
	mixed := classInput{name: MixedClass, seconds: window.Seconds()}
	var mixedTTFT, mixedITL [2][]*nativehist.Histogram
	var mixedDiffs []*nativehist.Histogram
	totalPairs := 0.0
	for _, class := range classOrder(slices.Collect(maps.Keys(classSet))) {
		in := classInput{name: class, seconds: window.Seconds()}
		for side, config := range exporter.Arms {
			k := key{config: config, class: class}
			t, i := histogram{ttft[k]}, histogram{itl[k]}
			in.arms[side] = armInput{
				completed:    int(math.Round(completed[k])),
				ttft:         t,
				itl:          i,
				speed:        reciprocal{i},
				outputTokens: tokens[k],
				seconds:      window.Seconds(),
			}
			mixedTTFT[side] = append(mixedTTFT[side], ttft[k])
			mixedITL[side] = append(mixedITL[side], itl[k])
			mixed.arms[side].completed += in.arms[side].completed
			mixed.arms[side].outputTokens += tokens[k]
		}
		in.pairs = PairCounts{
			BothCompleted:   roundCount(pairs[key{class: class, result: exporter.PairBothCompleted}]),
			AFailed:         roundCount(pairs[key{class: class, result: exporter.PairAFailed}]),
			BFailed:         roundCount(pairs[key{class: class, result: exporter.PairBFailed}]),
			BothFailed:      roundCount(pairs[key{class: class, result: exporter.PairBothFailed}]),
			TokenMismatches: roundCount(mismatches[key{class: class}]),
		}
		d := histogram{diffs[key{class: class}]}
		in.diffs, in.bFaster = d, roundCount(d.below())
		mixedDiffs = append(mixedDiffs, d.Histogram)
		mixed.pairs = addCounts(mixed.pairs, in.pairs)
		totalPairs += float64(in.pairs.total())
		ev.classes = append(ev.classes, in)
	}
	for side := range mixed.arms {
		mixed.arms[side].ttft = histogram{nativehist.Sum(mixedTTFT[side]...)}
		mixed.arms[side].itl = histogram{nativehist.Sum(mixedITL[side]...)}
		mixed.arms[side].speed = reciprocal{mixed.arms[side].itl}
		mixed.arms[side].seconds = window.Seconds()
	}
	mixedDiff := histogram{nativehist.Sum(mixedDiffs...)}
	mixed.diffs, mixed.bFaster = mixedDiff, roundCount(mixedDiff.below())
	ev.mixed = mixed

	if s := skipped[key{}]; s+totalPairs > 0 {
		ev.skippedShare = s / (s + totalPairs)
	}
	for k, v := range production {
		if v > 0 {
			if ev.production == nil {
				ev.production = map[string]float64{}
			}
			ev.production[k.class] = v
		}
	}
	ev.definitions = []string{
		"TTFT: from tandem handing the request to the upstream to the first frame carrying output.",
		fmt.Sprintf("Source: increase() of tandem's native histograms and counters over the %s window ending %s.", q.window, end.UTC().Format(time.RFC3339)),
		"Quantiles: interpolated within the native histogram bucket that holds the rank, as histogram_quantile does; 95% intervals from order statistics (binomial), widened to bucket bounds.",
		"Mix: class histograms merged bucket by bucket, as PromQL's sum does.",
		"System output rate: increase of " + exporter.MetricOutputTokens + " over the window divided by the window.",
		fmt.Sprintf("Kept up: judged on both arms' output rates over the same query window; taken during live traffic, the window's edges fall alike on both arms, so rates within %s tie (both kept up: no capacity claim) and a rate lower beyond that means that arm fell behind. A window that holds the start or the end of the traffic favours the arm with faster streams.", percent(o.RateTolerance)),
		"Per-request output speed p50: 1 / inter-token latency p50 (" + exporter.MetricInterTokenLatency + "), a monotonic transform of the same per-request quantity.",
		"B - A of TTFT quantiles and per-request speed p50: unpaired, since histograms keep no pairs; each arm's 97.5% interval subtracted, so it covers with at least 95%. The paired evidence is the line below.",
		fmt.Sprintf("Verdicts of B against A: slower or faster (higher or lower for rates) when the 95%% interval of B - A leaves out zero; equivalent when the whole interval lies within the margin, ±%s of A's value; inconclusive when it holds zero and leaves the margin; insufficient_data below %d pairs; invalid when the arms did not do comparable work.", percent(o.Margin), o.MinPairs),
		"Smallest detectable change: the difference a run with this interval's width finds with 80% power, 1.43 times the interval's half-width; more pairs needed assume the interval narrows as 1/√pairs around the same estimate.",
		"Paired: " + exporter.MetricTTFTDifference + ", the histogram of B - A per pair; B faster is the share below zero (Wilson 95% interval); median B - A with its sign-test interval (order statistics of the differences, widened to bucket bounds).",
	}
	return build(ev, o), nil
}

// key identifies one series of a query result by the labels it is grouped by.
type key struct{ config, class, result string }

func keyOf(m model.Metric) key {
	return key{
		config: string(m[exporter.LabelConfig]),
		class:  string(m[exporter.LabelClass]),
		result: string(m[exporter.LabelResult]),
	}
}

// querier runs instant queries of increase() over the window and keeps the
// first error.
type querier struct {
	ctx      context.Context
	api      v1.API
	end      time.Time
	window   string
	identity []string // matchers of the selected experiment
	err      error
	warnings []string
}

// selectExperiment finds the experiments that expose tandem_build_info in
// the window and match sel; exactly one must, and every later query selects
// it.
func (q *querier) selectExperiment(sel Experiment) error {
	var matchers []string
	for label, value := range map[string]string{promql.LabelJob: sel.Job, promql.LabelNamespace: sel.Namespace, promql.LabelExperiment: sel.Name} {
		if value != "" {
			matchers = append(matchers, promql.Eq(label, value))
		}
	}
	slices.Sort(matchers)
	expr := promql.Sum("max_over_time("+promql.Selector(exporter.MetricBuildInfo, matchers...)+"["+q.window+"])", promql.Identity...)
	v, _, _, err := q.api.Query(q.ctx, expr, q.end)
	if err != nil {
		return fmt.Errorf("query %s: %w", expr, err)
	}
	vec, _ := v.(model.Vector)
	switch len(vec) {
	case 0:
		return fmt.Errorf("no tandem matching %s exposed %s in the %s before %s", describe(sel), exporter.MetricBuildInfo, q.window, q.end.Format(time.RFC3339))
	case 1:
		for _, l := range promql.Identity {
			q.identity = append(q.identity, promql.Eq(l, string(vec[0].Metric[model.LabelName(l)])))
		}
		return nil
	}
	var choices []string
	for _, s := range vec {
		choices = append(choices, describe(Experiment{
			Job:       string(s.Metric[promql.LabelJob]),
			Namespace: string(s.Metric[promql.LabelNamespace]),
			Name:      string(s.Metric[promql.LabelExperiment]),
		}))
	}
	slices.Sort(choices)
	return fmt.Errorf("%d tandem experiments match %s; choose one with --job, --namespace and --experiment:\n  %s",
		len(vec), describe(sel), strings.Join(choices, "\n  "))
}

// describe writes sel as the flags that select it.
func describe(sel Experiment) string {
	var parts []string
	for _, f := range []struct{ flag, value string }{{"job", sel.Job}, {"namespace", sel.Namespace}, {"experiment", sel.Name}} {
		if f.value != "" {
			parts = append(parts, fmt.Sprintf("--%s %s", f.flag, f.value))
		}
	}
	if len(parts) == 0 {
		return "any experiment"
	}
	return strings.Join(parts, " ")
}

// vector runs sum by (by) (increase(metric{identity, matchers}[window])).
func (q *querier) vector(metric string, by []string, matchers ...string) model.Vector {
	if q.err != nil {
		return nil
	}
	expr := promql.Sum(promql.Increase(promql.Selector(metric, append(slices.Clone(q.identity), matchers...)...), q.window), by...)
	v, warnings, _, err := q.api.Query(q.ctx, expr, q.end)
	for _, w := range warnings {
		q.warnings = append(q.warnings, "prometheus: "+w)
	}
	if err != nil {
		q.err = fmt.Errorf("query %s: %w", expr, err)
		return nil
	}
	vec, ok := v.(model.Vector)
	if !ok {
		q.err = fmt.Errorf("query %s: got %s, want a vector", expr, v.Type())
	}
	return vec
}

// busySchedulingLatency is the p99 wait to run above which tandem says its
// own timings may be late: a frame is stamped when its goroutine runs.
const busySchedulingLatency = time.Millisecond

// schedulingLatencyP99 is the p99 of how long tandem's goroutines waited to
// run in the window, over every replica of the experiment; NaN
// when unknown.
func (q *querier) schedulingLatencyP99() float64 {
	if q.err != nil {
		return math.NaN()
	}
	perTandem := promql.Rate("go_sched_latencies_seconds_bucket", q.window) +
		" * on (job, instance) group_left () max by (job, instance) (" + promql.Selector(exporter.MetricBuildInfo, q.identity...) + ")"
	expr := promql.HistogramQuantile(0.99, promql.Sum(perTandem, "le"))
	v, _, _, err := q.api.Query(q.ctx, expr, q.end)
	if err != nil {
		return math.NaN() // a missing runtime metric is no reason to give no report
	}
	if vec, ok := v.(model.Vector); ok && len(vec) == 1 {
		return float64(vec[0].Value)
	}
	return math.NaN()
}

func (q *querier) values(metric string, by []string, matchers ...string) map[key]float64 {
	out := map[key]float64{}
	for _, s := range q.vector(metric, by, matchers...) {
		if s.Histogram == nil {
			out[keyOf(s.Metric)] += float64(s.Value)
		}
	}
	return out
}

func (q *querier) histograms(metric string, by []string, matchers ...string) map[key]*nativehist.Histogram {
	out := map[key]*nativehist.Histogram{}
	for _, s := range q.vector(metric, by, matchers...) {
		if s.Histogram == nil || q.err != nil {
			continue
		}
		h, err := nativehist.FromSampleHistogram(s.Histogram)
		if err != nil {
			q.err = fmt.Errorf("%s%s: %w", metric, s.Metric, err)
			return nil
		}
		out[keyOf(s.Metric)] = h
	}
	return out
}

func roundCount(x float64) int { return int(math.Round(x)) }

func addCounts(a, b PairCounts) PairCounts {
	return PairCounts{
		BothCompleted:   a.BothCompleted + b.BothCompleted,
		AFailed:         a.AFailed + b.AFailed,
		BFailed:         a.BFailed + b.BFailed,
		BothFailed:      a.BothFailed + b.BothFailed,
		TokenMismatches: a.TokenMismatches + b.TokenMismatches,
	}
}
