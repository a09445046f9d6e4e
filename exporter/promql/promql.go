// Package promql builds the PromQL that the dashboards, the rules and the
// report run against tandem's metric schema. The matchers and groupings they
// share are declared here once, so a label added to the schema reaches every
// query.
package promql

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// Target labels Prometheus attaches to every series of a scrape target. They
// are not part of tandem's exposition: job and instance come from the scrape
// configuration, namespace from Kubernetes service discovery, and experiment
// from a target label the deployment sets (see deploy/).
const (
	LabelJob        = "job"
	LabelNamespace  = "namespace"
	LabelExperiment = "experiment"
)

// Identity names one tandem deployment, one experiment, among all that a
// Prometheus scrapes: every aggregation keeps these labels, so two
// experiments never merge into one comparison, while instance (one replica
// of a deployment) is summed away. A label a target lacks is empty and
// groups as one value.
var Identity = []string{LabelJob, LabelNamespace, LabelExperiment}

// By is Identity followed by labels: the grouping of an aggregation that
// keeps experiments apart.
func By(labels ...string) []string { return slices.Concat(Identity, labels) }

// Matchers and groupings shared by the queries.
var (
	// Arms selects the series of A and B.
	Arms = In(exporter.LabelConfig, exporter.Arms...)
	// Failed selects the outcomes that count as an arm's failure: an error,
	// a timeout, or a stream cut before its end.
	Failed = In(exporter.LabelOutcome, exporter.OutcomeError, exporter.OutcomeTimeout, exporter.OutcomeIncomplete)
	// Production selects production's series.
	Production = Eq(exporter.LabelConfig, exporter.ConfigProduction)
	// ByConfigClass keeps one series per experiment, config and workload
	// class.
	ByConfigClass = By(exporter.LabelConfig, exporter.LabelClass)
)

// Eq is label="value".
func Eq(label, value string) string { return fmt.Sprintf("%s=%q", label, value) }

// In is label=~"v1|v2|...".
func In(label string, values ...string) string {
	return fmt.Sprintf("%s=~%q", label, strings.Join(values, "|"))
}

// Selector is metric{matchers...}, or metric alone without matchers.
func Selector(metric string, matchers ...string) string {
	if len(matchers) == 0 {
		return metric
	}
	return metric + "{" + strings.Join(matchers, ", ") + "}"
}

// Rate is rate(selector[window]); window is a PromQL duration or a Grafana
// variable such as $window.
func Rate(selector, window string) string { return "rate(" + selector + "[" + window + "])" }

// Increase is increase(selector[window]).
func Increase(selector, window string) string { return "increase(" + selector + "[" + window + "])" }

// Sum is sum(expr), or sum by (labels) (expr).
func Sum(expr string, by ...string) string {
	if len(by) == 0 {
		return "sum(" + expr + ")"
	}
	return "sum by (" + strings.Join(by, ", ") + ") (" + expr + ")"
}

// HistogramQuantile is histogram_quantile(q, expr).
func HistogramQuantile(q float64, expr string) string {
	return "histogram_quantile(" + strconv.FormatFloat(q, 'g', -1, 64) + ", " + expr + ")"
}
