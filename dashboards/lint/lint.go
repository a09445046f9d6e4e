// Package lint checks PromQL queries and Grafana panels against tandem's
// rules for native histograms: quantiles come from a merged distribution of
// the right group of requests, and are never averaged, summed or otherwise
// combined afterwards.
package lint

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kestrelops/tandem/exporter"
)

// histograms maps each tandem native histogram to whether it carries the
// config label.
var histograms = map[string]bool{
	exporter.MetricTimeToFirstToken:  true,
	exporter.MetricInterTokenLatency: true,
	exporter.MetricRequestDuration:   true,
	exporter.MetricTTFTDifference:    false,
}

// histogramFunctions are the PromQL functions that read a native histogram.
var histogramFunctions = map[string]bool{
	"histogram_quantile": true,
	"histogram_fraction": true,
	"histogram_count":    true,
	"histogram_sum":      true,
	"histogram_avg":      true,
	"histogram_stddev":   true,
	"histogram_stdvar":   true,
}

// shapeFunctions describe the shape of a distribution, so which requests
// were merged into it decides what the result means.
var shapeFunctions = map[string]bool{
	"histogram_quantile": true,
	"histogram_fraction": true,
}

var promql = parser.NewParser(parser.Options{})

// Parse parses expr, which must already have its Grafana variables expanded.
func Parse(expr string) (parser.Expr, error) {
	return promql.ParseExpr(expr)
}

// Check reports every rule expr breaks, joined into one error, or nil. expr
// must already have its Grafana variables expanded. mixed declares a query
// that deliberately merges workload classes: only such a query may group a
// quantile by config without class.
//
// The rules:
//   - expr parses;
//   - no classic histogram: no _bucket selector and no le label anywhere;
//   - every histogram_* function reads sum by (...) of rate or increase of a
//     tandem native histogram;
//   - histogram_quantile and histogram_fraction group by class, and by config
//     when the histogram has that label (mixed queries may drop class);
//   - a histogram_quantile result is never the argument, direct or
//     indirect, of an aggregation or an *_over_time function, and never
//     meets another histogram_quantile result in arithmetic.
func Check(expr string, mixed bool) error {
	root, err := Parse(expr)
	if err != nil {
		return fmt.Errorf("parse %q: %w", expr, err)
	}
	var errs []error
	parser.Inspect(root, func(node parser.Node, path []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			errs = append(errs, checkSelector(n)...)
		case *parser.AggregateExpr:
			if slices.Contains(n.Grouping, "le") {
				errs = append(errs, fmt.Errorf("%s uses le: classic histogram buckets; use the native histogram", n.Op))
			}
		case *parser.BinaryExpr:
			errs = append(errs, checkBinary(n)...)
		case *parser.Call:
			if histogramFunctions[n.Func.Name] {
				errs = append(errs, checkHistogramCall(n, mixed)...)
			}
			if n.Func.Name == "histogram_quantile" {
				errs = append(errs, checkQuantileAncestors(path)...)
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

func checkSelector(vs *parser.VectorSelector) []error {
	var errs []error
	if strings.HasSuffix(vs.Name, "_bucket") {
		errs = append(errs, fmt.Errorf("selector %s reads classic histogram buckets; query the native histogram", vs.Name))
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == "le" {
			errs = append(errs, fmt.Errorf("selector %s matches on le: classic histogram buckets; use the native histogram", vs))
		}
	}
	return errs
}

func checkBinary(b *parser.BinaryExpr) []error {
	var errs []error
	if vm := b.VectorMatching; vm != nil && (slices.Contains(vm.MatchingLabels, "le") || slices.Contains(vm.Include, "le")) {
		errs = append(errs, fmt.Errorf("%s matches on le: classic histogram buckets; use the native histogram", b.Op))
	}
	if isArithmetic(b.Op) && containsQuantile(b.LHS) && containsQuantile(b.RHS) {
		errs = append(errs, fmt.Errorf("%s combines two histogram_quantile results; quantiles of different groups cannot be added, averaged or otherwise combined: take the quantile of the merged histogram", b.Op))
	}
	return errs
}

func isArithmetic(op parser.ItemType) bool {
	switch op {
	case parser.ADD, parser.SUB, parser.MUL, parser.DIV, parser.MOD, parser.POW, parser.ATAN2:
		return true
	}
	return false
}

func containsQuantile(e parser.Node) bool {
	found := false
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if c, ok := node.(*parser.Call); ok && c.Func.Name == "histogram_quantile" {
			found = true
		}
		return nil
	})
	return found
}

func checkQuantileAncestors(path []parser.Node) []error {
	var errs []error
	for _, anc := range path {
		switch a := anc.(type) {
		case *parser.AggregateExpr:
			errs = append(errs, fmt.Errorf("%s is applied to a histogram_quantile result; a quantile of merged requests comes from the merged histogram, never from combining quantiles", a.Op))
		case *parser.Call:
			if strings.HasSuffix(a.Func.Name, "_over_time") {
				errs = append(errs, fmt.Errorf("%s is applied to a histogram_quantile result; take the quantile of the histogram's rate over the longer window instead", a.Func.Name))
			}
		}
	}
	return errs
}

func checkHistogramCall(c *parser.Call, mixed bool) []error {
	name := c.Func.Name
	agg, ok := unparen(c.Args[len(c.Args)-1]).(*parser.AggregateExpr)
	if !ok || agg.Op != parser.SUM || agg.Without {
		return []error{fmt.Errorf("%s must take sum by (...) of rate or increase of a tandem histogram", name)}
	}
	metric, ok := rateOfSelector(agg.Expr)
	if !ok {
		return []error{fmt.Errorf("%s must take sum by (...) of rate or increase of a tandem histogram; the sum does not wrap rate(...) or increase(...) of a selector", name)}
	}
	hasConfig, known := histograms[metric]
	if !known {
		return []error{fmt.Errorf("%s reads %s, which is not a tandem native histogram", name, metric)}
	}
	if !shapeFunctions[name] {
		return nil
	}
	byClass := slices.Contains(agg.Grouping, exporter.LabelClass)
	byConfig := slices.Contains(agg.Grouping, exporter.LabelConfig)
	var errs []error
	if hasConfig && !byConfig {
		errs = append(errs, fmt.Errorf("%s of %s must group by %s: each configuration has its own distribution", name, metric, exporter.LabelConfig))
	}
	if !byClass && !(mixed && hasConfig) {
		errs = append(errs, fmt.Errorf("%s of %s must group by %s; only a panel declared mixed may merge classes", name, metric, exporter.LabelClass))
	}
	return errs
}

func unparen(e parser.Expr) parser.Expr {
	for {
		switch p := e.(type) {
		case *parser.ParenExpr:
			e = p.Expr
		case *parser.StepInvariantExpr:
			e = p.Expr
		default:
			return e
		}
	}
}

// rateOfSelector returns the metric name of rate(m[...]) or increase(m[...]).
func rateOfSelector(e parser.Expr) (string, bool) {
	call, ok := unparen(e).(*parser.Call)
	if !ok || (call.Func.Name != "rate" && call.Func.Name != "increase") {
		return "", false
	}
	ms, ok := call.Args[0].(*parser.MatrixSelector)
	if !ok {
		return "", false
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok {
		return "", false
	}
	return selectorName(vs), true
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == "__name__" {
			return m.Value
		}
	}
	return ""
}

// Metrics returns the metric names expr selects, sorted and without
// duplicates. expr must already have its Grafana variables expanded.
func Metrics(expr string) ([]string, error) {
	root, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(root, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			names = append(names, selectorName(vs))
		}
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), nil
}
