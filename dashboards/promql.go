package dashboards

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

// selectedClasses matches the classes chosen in the class variable.
var selectedClasses = fmt.Sprintf(`%s=~"$%s"`, exporter.LabelClass, varClass)

// selectedExperiment matches the one experiment chosen in the identity
// variables.
var selectedExperiment = identityBefore("")

// identityBefore matches the identity variables that come before label in
// promql.Identity's order of the dashboard (namespace, job, experiment), or
// all of them when label is not one.
func identityBefore(label string) []string {
	var m []string
	for _, l := range []string{varNamespace, varJob, varExperiment} {
		if l == label {
			break
		}
		m = append(m, fmt.Sprintf(`%s=~"${%s:regex}"`, l, l))
	}
	return m
}

// gauge is metric{matchers} of the selected experiment.
func gauge(metric string, matchers ...string) string {
	return promql.Selector(metric, append(slices.Clone(selectedExperiment), matchers...)...)
}

// rate is rate(metric{matchers}[$window]) of the selected experiment.
func rate(metric string, matchers ...string) string {
	return promql.Rate(gauge(metric, matchers...), "$"+varWindow)
}

// increase is increase(metric{matchers}[$window]) of the selected
// experiment.
func increase(metric string, matchers ...string) string {
	return promql.Increase(gauge(metric, matchers...), "$"+varWindow)
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
