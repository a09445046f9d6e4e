package statuspage

import (
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// page renders pageData; its "chart" template renders a chart.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"args": func(d pageData, c ClassStatus) classArgs { return classArgs{d, c} },
}).Parse(pageHTML))

//go:embed page.html.tmpl
var pageHTML string

// pageData is what the page template renders.
type pageData struct {
	Status
	RefreshSeconds int
}

// Compare reports whether both arms are present, for the B−A column.
func (d pageData) Compare() bool {
	return len(d.Classes) > 0 && hasConfig(d.Classes[0], exporter.ConfigA) && hasConfig(d.Classes[0], exporter.ConfigB)
}

func hasConfig(c ClassStatus, config string) bool {
	_, ok := c.Config(config)
	return ok
}

// row is one line of a class table: a metric across configs.
type row struct {
	Metric string
	Label  string
	Cells  []cell
	Diff   string
}

type cell struct {
	Config string
	Text   string
}

type rowSpec struct {
	metric, label string
	value         func(ConfigStatus) *float64
	format        func(float64) string
	diff          func(a, b float64) string
}

func ptr(f float64) *float64 { return &f }

var rowSpecs = []rowSpec{
	{"completed", "completed requests", func(s ConfigStatus) *float64 { return ptr(s.Completed) }, formatCount, diffCount},
	{"failed", "failed requests", func(s ConfigStatus) *float64 { return ptr(s.Failed) }, formatCount, diffCount},
	{"requests_per_second", "completed requests/s", func(s ConfigStatus) *float64 { return s.RequestsPerSecond }, formatRate, diffRate},
	{"ttft_p50", "TTFT p50", func(s ConfigStatus) *float64 { return s.TTFTP50Seconds }, formatSeconds, diffSeconds},
	{"ttft_p95", "TTFT p95", func(s ConfigStatus) *float64 { return s.TTFTP95Seconds }, formatSeconds, diffSeconds},
	{"ttft_p99", "TTFT p99", func(s ConfigStatus) *float64 { return s.TTFTP99Seconds }, formatSeconds, diffSeconds},
	{"output_tokens_per_second", "output tokens/s", func(s ConfigStatus) *float64 { return s.OutputTokensPerSecond }, formatRate, diffRate},
}

func (d pageData) Rows(c ClassStatus) []row {
	var rows []row
	for _, spec := range rowSpecs {
		r := row{Metric: spec.metric, Label: spec.label}
		for _, s := range c.Configs {
			r.Cells = append(r.Cells, cell{Config: s.Config, Text: d.text(spec, spec.value(s))})
		}
		a, aok := c.Config(exporter.ConfigA)
		b, bok := c.Config(exporter.ConfigB)
		if aok && bok {
			va, vb := spec.value(a), spec.value(b)
			switch {
			case va != nil && vb != nil:
				r.Diff = spec.diff(*va, *vb)
			default:
				r.Diff = d.text(spec, nil)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func (d pageData) text(spec rowSpec, v *float64) string {
	switch {
	case v != nil:
		return spec.format(*v)
	case d.WarmingUp && (spec.metric == "requests_per_second" || spec.metric == "output_tokens_per_second"):
		return "warming up"
	default:
		return "–"
	}
}

func formatCount(v float64) string { return fmt.Sprintf("%.0f", v) }
func formatRate(v float64) string  { return fmt.Sprintf("%.2f", v) }

func formatSeconds(v float64) string {
	if math.Abs(v) >= 1 {
		return fmt.Sprintf("%.3f s", v)
	}
	return fmt.Sprintf("%.1f ms", v*1000)
}

func diffCount(a, b float64) string { return fmt.Sprintf("%+.0f", b-a) }
func diffRate(a, b float64) string  { return fmt.Sprintf("%+.2f", b-a) + relative(a, b) }

func diffSeconds(a, b float64) string {
	s := formatSeconds(b - a)
	if b >= a {
		s = "+" + s
	}
	return s + relative(a, b)
}

func relative(a, b float64) string {
	if a == 0 {
		return ""
	}
	return fmt.Sprintf(" (%+.1f%%)", 100*(b-a)/a)
}

// Pairs lists pair results in schema order.
func (d pageData) Pairs(c ClassStatus) []labelled {
	var out []labelled
	for _, r := range exporter.PairResults {
		if v, ok := c.Pairs[r]; ok {
			out = append(out, labelled{r, formatCount(v)})
		}
	}
	return out
}

// Skipped lists skip reasons in schema order, then any others.
func (d pageData) Skipped() []labelled {
	set := map[string]bool{}
	for r := range d.MirrorSkipped {
		set[r] = true
	}
	var out []labelled
	for _, r := range ordered(set, exporter.SkipReasons) {
		out = append(out, labelled{r, formatCount(d.MirrorSkipped[r])})
	}
	return out
}

type labelled struct{ Name, Value string }

// RecordsAlert is the line shown when the record file lost records or could
// not be written; empty otherwise.
func (d pageData) RecordsAlert() string {
	var lost float64
	var reasons []string
	set := map[string]bool{}
	for r := range d.Records.Dropped {
		set[r] = true
	}
	for _, r := range ordered(set, exporter.RecordDropReasons) {
		if v := d.Records.Dropped[r]; v > 0 {
			lost += v
			reasons = append(reasons, r+" "+formatCount(v))
		}
	}
	if d.Records.WriteErrors == 0 && lost == 0 {
		return ""
	}
	s := "records: " + formatCount(d.Records.WriteErrors) + " write errors"
	if recent := d.Records.RecentWriteErrors; recent != nil {
		s += fmt.Sprintf(", %s in the last %v s", formatCount(*recent), d.WindowSeconds)
	} else {
		s += " since start"
	}
	if lost > 0 {
		s += fmt.Sprintf("; %s records lost (%s)", formatCount(lost), strings.Join(reasons, ", "))
	}
	return s
}

func (d pageData) Median(v *float64) string {
	if v == nil {
		return "–"
	}
	s := formatSeconds(*v)
	if *v >= 0 {
		s = "+" + s
	}
	return s
}

// Chart is the TTFT chart of c, nil when it has no completed requests.
func (d pageData) Chart(c ClassStatus) *chart { return ttftChart(c) }

// classArgs are the arguments of the "class" template.
type classArgs struct {
	D pageData
	C ClassStatus
}
