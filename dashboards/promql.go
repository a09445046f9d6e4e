package dashboards

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// Label matchers shared by the queries.
var (
	selectedClasses  = fmt.Sprintf(`%s=~"$%s"`, exporter.LabelClass, varClass)
	arms             = in(exporter.LabelConfig, exporter.Arms...)
	productionConfig = is(exporter.LabelConfig, exporter.ConfigProduction)
)

func is(label, value string) string { return fmt.Sprintf("%s=%q", label, value) }

func in(label string, values ...string) string {
	return fmt.Sprintf("%s=~%q", label, strings.Join(values, "|"))
}

// selector is metric{matchers...}.
func selector(metric string, matchers ...string) string {
	if len(matchers) == 0 {
		return metric
	}
	return metric + "{" + strings.Join(matchers, ", ") + "}"
}

// rate is rate(selector[$window]).
func rate(metric string, matchers ...string) string {
	return fmt.Sprintf("rate(%s[$%s])", selector(metric, matchers...), varWindow)
}

// increase is increase(selector[$window]).
func increase(metric string, matchers ...string) string {
	return fmt.Sprintf("increase(%s[$%s])", selector(metric, matchers...), varWindow)
}

// sumBy is sum by (labels) (expr).
func sumBy(labels []string, expr string) string {
	return fmt.Sprintf("sum by (%s) (%s)", strings.Join(labels, ", "), expr)
}

// quantile is the q-quantile of the merged native histogram of each group.
func quantile(q float64, by []string, metric string, matchers ...string) string {
	return fmt.Sprintf("histogram_quantile(%s, %s)", strconv.FormatFloat(q, 'f', -1, 64), sumBy(by, rate(metric, matchers...)))
}

func by(labels ...string) []string { return labels }

// percentile names quantile q as e.g. "p95".
func percentile(q float64) string {
	return "p" + strconv.FormatFloat(q*100, 'f', -1, 64)
}
