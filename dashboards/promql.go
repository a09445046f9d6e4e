package dashboards

import (
	"fmt"
	"strconv"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

// selectedClasses matches the classes chosen in the class variable.
var selectedClasses = fmt.Sprintf(`%s=~"$%s"`, exporter.LabelClass, varClass)

// rate is rate(metric{matchers}[$window]).
func rate(metric string, matchers ...string) string {
	return promql.Rate(promql.Selector(metric, matchers...), "$"+varWindow)
}

// increase is increase(metric{matchers}[$window]).
func increase(metric string, matchers ...string) string {
	return promql.Increase(promql.Selector(metric, matchers...), "$"+varWindow)
}

// quantile is the q-quantile of the merged native histogram of each group.
func quantile(q float64, by []string, metric string, matchers ...string) string {
	return promql.HistogramQuantile(q, promql.Sum(rate(metric, matchers...), by...))
}

func by(labels ...string) []string { return labels }

// percentile names quantile q as e.g. "p95".
func percentile(q float64) string {
	return "p" + strconv.FormatFloat(q*100, 'f', -1, 64)
}
