package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

// production is the dashboard of the production path.
func production(cfg Config) (Dashboard, error) {
	model, err := newDashboard(cfg, UIDProduction, "tandem: production",
		"Production traffic through tandem, per workload class.").
		WithPanel(productionTTFT()).
		WithPanel(productionRequests()).
		WithPanel(productionErrors()).
		WithPanel(productionOutputRate()).
		Build()
	if err != nil {
		return Dashboard{}, fmt.Errorf("dashboard %s: %w", UIDProduction, err)
	}
	return Dashboard{Model: model}, nil
}

func productionTTFT() *timeseries.PanelBuilder {
	return timeseriesPanel("Production TTFT p50 / p95 / p99 by class",
		"Time to first token of completed production requests, from tandem handing the request over to the first frame carrying output; quantiles of each class's native histogram over the rate window.",
		units.Seconds, ttftQuantileQueries(promql.Production, "{{class}}")...)
}

func productionRequests() *timeseries.PanelBuilder {
	return timeseriesPanel("Production request rate by class",
		"Production requests per second, all outcomes.",
		units.RequestsPerSecond,
		query(promql.Sum(rate(exporter.MetricRequests, promql.Production, selectedClasses), exporter.LabelClass), "{{class}}"))
}

func productionErrors() *timeseries.PanelBuilder {
	failed := promql.In(exporter.LabelOutcome, exporter.OutcomeError, exporter.OutcomeIncomplete)
	return timeseriesPanel("Production error share by class",
		"Share of production requests that failed: error (non-2xx, transport failure or an error reported in the stream) or incomplete (stream cut before its end). Requests the client canceled are not errors.",
		units.PercentUnit,
		query(promql.Sum(rate(exporter.MetricRequests, promql.Production, selectedClasses, failed), exporter.LabelClass)+
			" / "+promql.Sum(rate(exporter.MetricRequests, promql.Production, selectedClasses), exporter.LabelClass), "{{class}}"))
}

func productionOutputRate() *timeseries.PanelBuilder {
	return timeseriesPanel("Production output rate by class",
		"Output tokens of completed production requests per second, summed over all streams.",
		unitTokensPerSecond,
		query(promql.Sum(rate(exporter.MetricOutputTokens, promql.Production, selectedClasses), exporter.LabelClass), "{{class}}"))
}
