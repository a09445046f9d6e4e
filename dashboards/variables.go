package dashboards

import (
	"regexp"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// multiValue lists the dashboard variables that take several values.
var multiValue = map[string]bool{varClass: true}

// variableRef matches ${name}, ${name:format}, [[name]], [[name:format]]
// and $name, the forms Grafana interpolates.
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)(?::(\w+))?\]\]|\$(\w+)`)

// ExpandVariables replaces the dashboard variables in expr with values as
// Grafana's Prometheus data source would: a multi-value variable (class)
// becomes a regex, escaped, and several values become the alternation
// (a|b); other variables ($window, $__rate_interval, ...) are inserted
// verbatim. The formats regex, pipe, csv and raw are honoured. Variables
// missing from vars are left as they are.
func ExpandVariables(expr string, vars map[string][]string) string {
	return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name, format := m[1]+m[3]+m[5], m[2]+m[4]
		values, ok := vars[name]
		if !ok || len(values) == 0 {
			return ref
		}
		switch format {
		case "raw", "csv":
			return strings.Join(values, ",")
		case "pipe":
			return strings.Join(values, "|")
		case "regex":
			return regexAlternation(values)
		}
		if !multiValue[name] {
			return strings.Join(values, ",")
		}
		return regexAlternation(values)
	})
}

// regexAlternation escapes each value for a regex inside a PromQL string
// literal and joins several values as (a|b).
func regexAlternation(values []string) string {
	escaped := make([]string, len(values))
	for i, v := range values {
		escaped[i] = strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
	}
	if len(escaped) == 1 {
		return escaped[0]
	}
	return "(" + strings.Join(escaped, "|") + ")"
}

// DefaultVariables are the values of the dashboard variables when a
// dashboard opens on a tandem with only the built-in classes scraped by the
// Prometheus of deploy/prometheus: job tandem, no namespace or experiment
// label, all classes, the default window.
func DefaultVariables() map[string][]string {
	return map[string][]string{
		varNamespace:      {""},
		varJob:            {"tandem"},
		varExperiment:     {""},
		varClass:          exporter.BuiltinClasses,
		varWindow:         {DefaultConfig().DefaultWindow},
		"__rate_interval": {"1m"},
	}
}
