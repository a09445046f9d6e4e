package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

// titleMixedTTFT is the panel that merges the selected classes.
const titleMixedTTFT = "Mixed traffic: TTFT p95 by arm, selected classes merged"

var ttftQuantiles = []float64{0.5, 0.95, 0.99}

// comparison is the A/B comparison dashboard.
func comparison(cfg Config) (Dashboard, error) {
	b := newDashboard(cfg, UIDComparison, "tandem: A/B comparison",
		"Configurations A and B measured on the same mirrored requests at the same moment, per workload class.").
		WithRow(dashboard.NewRowBuilder("Class $" + varClass).Repeat(varClass)).
		WithPanel(ttftByArm()).
		WithPanel(interTokenByArm()).
		WithPanel(outputRateByArm()).
		WithPanel(requestsByOutcome())
	for _, arm := range exporter.Arms {
		b.WithPanel(ttftHeatmap(arm))
	}
	b.WithRow(dashboard.NewRowBuilder("Mixed traffic")).
		WithPanel(mixedTTFT().Span(16)).
		WithPanel(textPanel("How the mixed p95 is computed",
			"Why the mixed-traffic p95 is not an average of class p95s.",
			"The mixed p95 is the 95th percentile of the **merged** distribution: the native TTFT histograms of all "+
				"selected classes are summed bucket by bucket per arm, and the quantile is read from that sum.\n\n"+
				"It is never an average (or any other combination) of per-class p95s: those ignore how many requests "+
				"each class had and where its tail lies. The lint in `dashboards/lint` rejects such queries.").Span(8)).
		WithRow(dashboard.NewRowBuilder("Paired comparison")).
		WithPanel(pairsBFaster().Span(8)).
		WithPanel(pairedMedian().Span(8)).
		WithPanel(pairResults().Span(8)).
		WithRow(dashboard.NewRowBuilder("Work parity")).
		WithPanel(completedByArm().Span(6)).
		WithPanel(outputTokensByArm().Span(6)).
		WithPanel(tokenMismatches().Span(6)).
		WithPanel(estimatedTokens().Span(6)).
		WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(skippedMirrors().Span(8)).
		WithPanel(shadowsInFlight().Span(8)).
		WithPanel(shadowFailures().Span(8)).
		WithRow(dashboard.NewRowBuilder("Representativeness")).
		WithPanel(classMix()).
		WithPanel(cachedShare())

	model, err := b.Build()
	if err != nil {
		return Dashboard{}, fmt.Errorf("dashboard %s: %w", UIDComparison, err)
	}
	return Dashboard{Model: model, Mixed: []string{titleMixedTTFT}}, nil
}

func ttftByArm() *timeseries.PanelBuilder {
	return timeseriesPanel("TTFT p50 / p95 / p99 by arm ($class)",
		"Time to first token of completed mirrored requests of this class, from tandem handing the request over to the first frame carrying output. Quantiles of each arm's native histogram over the rate window.",
		units.Seconds, ttftQuantileQueries(promql.Arms, "{{config}}")...)
}

// ttftQuantileQueries are the TTFT p50, p95 and p99 of the configs config
// selects, per config and class, each legend led by legend.
func ttftQuantileQueries(config, legend string) []*prometheus.DataqueryBuilder {
	var targets []*prometheus.DataqueryBuilder
	for _, q := range ttftQuantiles {
		targets = append(targets, query(
			quantile(q, promql.ByConfigClass, exporter.MetricTimeToFirstToken, config, selectedClasses),
			legend+" "+percentile(q)))
	}
	return targets
}

func interTokenByArm() *timeseries.PanelBuilder {
	return timeseriesPanel("Inter-token latency p95 by arm ($class)",
		"Per-request inter-token latency, (last output frame - first output frame) / (output tokens - 1), of completed mirrored requests with at least two output tokens; p95 of each arm's native histogram.",
		units.Seconds,
		query(quantile(0.95, promql.ByConfigClass, exporter.MetricInterTokenLatency, promql.Arms, selectedClasses), "{{config}} p95"))
}

func outputRateByArm() *timeseries.PanelBuilder {
	return timeseriesPanel("Output rate by arm ($class)",
		"System output rate: output tokens of completed mirrored requests per second, summed over all streams of the arm. Both arms receive the same requests, so unequal rates mean unequal work or unequal speed; check Work parity.",
		unitTokensPerSecond,
		query(promql.Sum(rate(exporter.MetricOutputTokens, promql.Arms, selectedClasses), promql.ByConfigClass...), "{{config}}"))
}

func requestsByOutcome() *timeseries.PanelBuilder {
	return timeseriesPanel("Requests by outcome and arm ($class)",
		"Mirrored requests per second by outcome: completed, error (non-2xx, transport failure or an error reported in the stream), timeout (shadow timeout), canceled, incomplete (stream cut before its end).",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricRequests, promql.Arms, selectedClasses), exporter.LabelConfig, exporter.LabelClass, exporter.LabelOutcome), "{{config}} {{outcome}}"))
}

func ttftHeatmap(arm string) *heatmap.PanelBuilder {
	return heatmapPanel(fmt.Sprintf("TTFT distribution, arm %s ($class)", arm),
		fmt.Sprintf("Native histogram of arm %s's time to first token over time: each column is the rate of completed requests per TTFT bucket over the rate window.", arm),
		units.Seconds,
		query(promql.Sum(rate(exporter.MetricTimeToFirstToken, promql.Eq(exporter.LabelConfig, arm), selectedClasses), promql.ByConfigClass...), "{{config}} {{class}}"))
}

func mixedTTFT() *timeseries.PanelBuilder {
	return timeseriesPanel(titleMixedTTFT,
		"TTFT p95 of each arm over all selected classes together, read from the merged native histogram (sum by config). Never an average of the per-class p95s.",
		units.Seconds,
		query(quantile(0.95, by(exporter.LabelConfig), exporter.MetricTimeToFirstToken, promql.Arms, selectedClasses), "{{config}} p95"))
}

func pairsBFaster() *timeseries.PanelBuilder {
	return timeseriesPanel("Pairs in which B had the lower TTFT",
		"Share of pairs (the same mirrored request completed on both arms) whose TTFT difference B - A was below zero, from the paired-difference native histogram; interpolated within the bucket around zero. Above 50% means B was faster more often.",
		units.PercentUnit,
		query(fmt.Sprintf("histogram_fraction(-Inf, 0, %s)",
			promql.Sum(rate(exporter.MetricTTFTDifference, selectedClasses), exporter.LabelClass)), "{{class}}"))
}

func pairedMedian() *timeseries.PanelBuilder {
	return timeseriesPanel("Median paired TTFT difference (B - A)",
		"Median of TTFT(B) - TTFT(A) over pairs of the same request in which both arms completed; negative means B was faster.",
		units.Seconds,
		query(quantile(0.5, by(exporter.LabelClass), exporter.MetricTTFTDifference, selectedClasses), "{{class}}"))
}

func pairResults() *timeseries.PanelBuilder {
	return timeseriesPanel("Pair results",
		"Mirrored requests per second by the outcome of both arms: both_completed, a_failed, b_failed, both_failed. Only both_completed pairs enter the paired comparison.",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricPairs, selectedClasses), exporter.LabelClass, exporter.LabelResult), "{{class}} {{result}}"))
}

func completedByArm() *timeseries.PanelBuilder {
	return timeseriesPanel("Completed requests per arm",
		"Completed mirrored requests per arm and class within the rate window. A and B get the same requests; a gap means the arms did not do the same work and throughput is not comparable like for like.",
		units.Short,
		query(promql.Sum(increase(exporter.MetricRequests, promql.Arms, selectedClasses,
			promql.Eq(exporter.LabelOutcome, exporter.OutcomeCompleted)), promql.ByConfigClass...), "{{config}} {{class}}"))
}

func outputTokensByArm() *timeseries.PanelBuilder {
	return timeseriesPanel("Output tokens per arm",
		"Output tokens of completed mirrored requests per arm and class within the rate window (server usage, or counted frames when no usage came).",
		units.Short,
		query(promql.Sum(increase(exporter.MetricOutputTokens, promql.Arms, selectedClasses), promql.ByConfigClass...), "{{config}} {{class}}"))
}

func tokenMismatches() *timeseries.PanelBuilder {
	return timeseriesPanel("Pairs with unequal output tokens",
		"Share of pairs completed on both arms whose output token counts differed. High values mean the arms generated different amounts of work for the same requests (sampling, limits, stop conditions).",
		units.PercentUnit,
		query(promql.Sum(rate(exporter.MetricPairOutputTokensMismatch, selectedClasses), exporter.LabelClass)+
			" / "+promql.Sum(rate(exporter.MetricPairs, selectedClasses,
			promql.Eq(exporter.LabelResult, exporter.PairBothCompleted)), exporter.LabelClass), "{{class}}"))
}

func estimatedTokens() *timeseries.PanelBuilder {
	return timeseriesPanel("Token counts estimated from frames",
		"Completed requests per second whose output tokens were counted from output frames because the server sent no usage; such counts are approximate.",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricEstimatedTokenCounts), exporter.LabelConfig), "{{config}}"))
}

func skippedMirrors() *timeseries.PanelBuilder {
	return timeseriesPanel("Mirrors skipped by reason",
		"Requests on mirrored paths that were not mirrored, per second: overloaded (an arm was at its in-flight limit, so neither got it), body_too_large, invalid_body, unsupported.",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricMirrorSkipped), exporter.LabelReason), "{{reason}}"))
}

func shadowsInFlight() *timeseries.PanelBuilder {
	return timeseriesPanel("Shadows in flight",
		"Mirrored requests currently in flight to each arm.",
		units.Short,
		query(promql.Sum(gauge(exporter.MetricShadowInFlight), exporter.LabelConfig), "{{config}}"))
}

func shadowFailures() *timeseries.PanelBuilder {
	return timeseriesPanel("Shadow errors, timeouts and cut streams",
		"Mirrored requests per second that failed (non-2xx, transport failure or an error reported in the stream), hit the shadow timeout, or whose stream was cut before its end (incomplete), per arm, all classes.",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricRequests, promql.Arms, promql.Failed), exporter.LabelConfig, exporter.LabelOutcome), "{{config}} {{outcome}}"))
}

func classMix() *timeseries.PanelBuilder {
	configs := promql.In(exporter.LabelConfig, exporter.ConfigProduction, exporter.ConfigA)
	return timeseriesPanel("Class mix: production vs mirrored",
		"Share of requests per class, all classes, for production and for the mirrored sample (arm A). Different mixes mean the sample does not represent production traffic.",
		units.PercentUnit,
		query(promql.Sum(rate(exporter.MetricRequests, configs), promql.ByConfigClass...)+
			" / on (config) group_left "+promql.Sum(rate(exporter.MetricRequests, configs), exporter.LabelConfig),
			"{{config}} {{class}}"))
}

func cachedShare() *timeseries.PanelBuilder {
	return timeseriesPanel("Server-reported cached prompt-token share",
		"Cached prompt tokens / prompt tokens of completed requests, as the servers report them (usage.prompt_tokens_details.cached_tokens), per arm and class. A check on the workload classifier: repeated_prefix should show more cache hits than fresh.",
		units.PercentUnit,
		query(promql.Sum(rate(exporter.MetricCachedPromptTokens, promql.Arms, selectedClasses), promql.ByConfigClass...)+
			" / "+promql.Sum(rate(exporter.MetricPromptTokens, promql.Arms, selectedClasses), promql.ByConfigClass...),
			"{{config}} {{class}}"))
}
