package dashboards

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/text"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

// Dashboard variable names.
const (
	varDatasource = "datasource"
	varClass      = "class"
	varWindow     = "window"
)

// The experiment variables pick one tandem deployment by its identity
// (promql.Identity), each narrowed by the ones before it.
var (
	varNamespace  = promql.LabelNamespace
	varJob        = promql.LabelJob
	varExperiment = promql.LabelExperiment
)

// unitTokensPerSecond is a Grafana custom unit.
const unitTokensPerSecond = "suffix: tok/s"

func datasourceRef() common.DataSourceRef {
	return common.DataSourceRef{
		Type: cog.ToPtr("prometheus"),
		Uid:  cog.ToPtr("${" + varDatasource + "}"),
	}
}

func variables(cfg Config) []cog.Builder[dashboard.VariableModel] {
	classQuery := fmt.Sprintf("label_values(%s, %s)", exporter.MetricRequests, exporter.LabelClass)
	windows := make([]dashboard.VariableOption, len(cfg.Windows))
	for i, w := range cfg.Windows {
		windows[i] = option(w, w == cfg.DefaultWindow)
	}
	return []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder(varDatasource).
			Label("Data source").
			Description("Prometheus that scrapes tandem with native histograms enabled.").
			Type("prometheus"),
		identityVariable(varNamespace, "Namespace", "Kubernetes namespace of the tandem deployment; empty outside Kubernetes."),
		identityVariable(varJob, "Job", "Prometheus job scraping the tandem deployment."),
		identityVariable(varExperiment, "Experiment", "The experiment target label of the tandem deployment; empty when the deployment sets none."),
		dashboard.NewQueryVariableBuilder(varClass).
			Label("Workload class").
			Description("Workload classes to show; panels that merge classes merge the selected ones.").
			Datasource(datasourceRef()).
			Query(dashboard.StringOrMap{String: cog.ToPtr(classQuery)}).
			Definition(classQuery).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			Current(dashboard.VariableOption{
				Text:  dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
				Value: dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
			}),
		dashboard.NewIntervalVariableBuilder(varWindow).
			Label("Rate window").
			Description("Window of rate() and increase(): longer windows hold more requests per quantile and react more slowly.").
			Values(dashboard.StringOrMap{String: cog.ToPtr(strings.Join(cfg.Windows, ","))}).
			Options(windows).
			Current(option(cfg.DefaultWindow, true)),
	}
}

// identityVariable picks one value of an identity label among the tandems
// that match the identity variables before it; never all, so that two
// experiments are never shown as one.
func identityVariable(label, title, description string) cog.Builder[dashboard.VariableModel] {
	q := fmt.Sprintf("label_values(%s, %s)", promql.Selector(exporter.MetricBuildInfo, identityBefore(label)...), label)
	return dashboard.NewQueryVariableBuilder(label).
		Label(title).
		Description(description).
		Datasource(datasourceRef()).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

func option(value string, selected bool) dashboard.VariableOption {
	return dashboard.VariableOption{
		Selected: cog.ToPtr(selected),
		Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr(value)},
		Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr(value)},
	}
}

func newDashboard(cfg Config, uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"tandem", "generated"}).
		Readonly().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh(cfg.Refresh).
		Time(cfg.TimeFrom, "now").
		Timezone(common.TimeZoneBrowser).
		Variables(variables(cfg))
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(datasourceRef()).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// timeseriesPanel is the shared time series panel: one query per target,
// legend as a table below.
func timeseriesPanel(title, description, unit string, targets ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasourceRef()).
		Unit(unit).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"lastNotNull"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending)).
		Height(8).
		Span(12)
	for i, t := range targets {
		p.WithTarget(t.RefId(refID(i)))
	}
	return p
}

// heatmapPanel shows the buckets of one native histogram series over time.
func heatmapPanel(title, description, unit string, target *prometheus.DataqueryBuilder) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasourceRef()).
		Unit(unit).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit(unit)).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Steps(64)).
		CellValues(heatmap.NewCellValuesBuilder().Unit(units.RequestsPerSecond)).
		ShowLegend().
		Tooltip(heatmap.NewHeatmapTooltipBuilder().
			Mode(common.TooltipDisplayModeSingle).
			YHistogram(true)).
		Height(8).
		Span(12).
		WithTarget(target.RefId(refID(0)))
}

func textPanel(title, description, markdown string) *text.PanelBuilder {
	return text.NewPanelBuilder().
		Title(title).
		Description(description).
		Mode(text.TextModeMarkdown).
		Content(markdown).
		Height(8)
}

func refID(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return "Q" + strconv.Itoa(i)
}
