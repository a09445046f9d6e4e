package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// Formats lists the formats Write accepts.
var Formats = []string{"text", "markdown", "json"}

// Write renders the report as text (for a terminal), markdown or json.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "text":
		return r.writeText(w)
	case "markdown":
		return r.writeMarkdown(w)
	}
	return fmt.Errorf("unknown format %q, want one of %s", format, strings.Join(Formats, ", "))
}

func (r *Report) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "tandem report from %s, %s to %s\n\n", r.Source, r.Window.Start.Format(time.RFC3339), r.Window.End.Format(time.RFC3339))
	for _, s := range r.Answer {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	list := func(title string, items []string) {
		fmt.Fprintf(&b, "\n%s\n", title)
		for _, s := range items {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	list("Decision", r.Decision)
	list("Because", r.Because)
	list("What would change it", r.WhatWouldChangeIt)
	for _, c := range r.allClasses() {
		fmt.Fprintf(&b, "\n%s\n", classTitle(c))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  \tA\tB\tB vs A\tverdict")
		for _, row := range tableRows(c) {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
		}
		tw.Flush()
		fmt.Fprintf(&b, "  %s\n", pairedLine(c))
		if c.Withheld != "" {
			fmt.Fprintf(&b, "  withheld: %s\n", c.Withheld)
		}
	}
	if len(r.Validity.Warnings) > 0 {
		list("Warnings", r.Validity.Warnings)
	}
	list("Definitions", r.Definitions)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# tandem report\n\nFrom %s, %s to %s.\n\n```\n%s\n```\n", r.Source, r.Window.Start.Format(time.RFC3339), r.Window.End.Format(time.RFC3339), strings.Join(r.Answer, "\n"))
	list := func(title string, items []string) {
		fmt.Fprintf(&b, "\n## %s\n\n", title)
		for _, s := range items {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	list("Decision", r.Decision)
	list("Because", r.Because)
	list("What would change it", r.WhatWouldChangeIt)
	for _, c := range r.allClasses() {
		fmt.Fprintf(&b, "\n## %s\n\n", classTitle(c))
		b.WriteString("| | A | B | B vs A | verdict |\n|---|---:|---:|---:|---|\n")
		for _, row := range tableRows(c) {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
		fmt.Fprintf(&b, "\n%s\n", pairedLine(c))
		if c.Withheld != "" {
			fmt.Fprintf(&b, "\nWithheld: %s\n", c.Withheld)
		}
	}
	if len(r.Validity.Warnings) > 0 {
		list("Warnings", r.Validity.Warnings)
	}
	list("Definitions", r.Definitions)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) allClasses() []Class { return append(append([]Class{}, r.Classes...), r.Mixed) }

func classTitle(c Class) string {
	if c.Class == MixedClass {
		return "mixed (merged distribution of all requests)"
	}
	return "class " + c.Class
}

func tableRows(c Class) [][]string {
	a, b := c.Arms[exporter.ConfigA], c.Arms[exporter.ConfigB]
	withCI := func(v Float, ci Interval) string {
		return fmt.Sprintf("%s [%s, %s]", seconds(float64(v)), seconds(ci[0]), seconds(ci[1]))
	}
	speedCI := func(v Float, ci Interval) string {
		return fmt.Sprintf("%s [%s, %s]", rate(v), rate(Float(ci[0])), rate(Float(ci[1])))
	}
	rateVerdict := c.OutputRateVerdict
	if c.OutputRateCase != "" {
		rateVerdict += " (" + c.OutputRateCase + ")"
	}
	systemVerdict, steady := rateVerdict, []string(nil)
	if c.SteadyState != nil {
		systemVerdict = ""
		steady = []string{"steady-state output tokens/s", rate(a.SteadyOutputTokensPerSecond), rate(b.SteadyOutputTokensPerSecond), ratio(c.SteadyOutputRateRatio), rateVerdict}
	}
	diff := func(c Comparison) string {
		return fmt.Sprintf("%s [%s, %s]", signedSeconds(float64(c.Difference)), signedSeconds(c.DifferenceCI[0]), signedSeconds(c.DifferenceCI[1]))
	}
	rows := [][]string{
		{"completed", strconv.Itoa(a.Completed), strconv.Itoa(b.Completed), "", ""},
		{"TTFT p50 [95% CI]", withCI(a.TTFTP50Seconds, a.TTFTP50CISeconds), withCI(b.TTFTP50Seconds, b.TTFTP50CISeconds), diff(c.TTFT[0]), c.TTFT[0].Verdict},
		{"TTFT p95 [95% CI]", withCI(a.TTFTP95Seconds, a.TTFTP95CISeconds), withCI(b.TTFTP95Seconds, b.TTFTP95CISeconds), diff(c.TTFT[1]), c.TTFT[1].Verdict},
		{"TTFT p99 [95% CI]", withCI(a.TTFTP99Seconds, a.TTFTP99CISeconds), withCI(b.TTFTP99Seconds, b.TTFTP99CISeconds), diff(c.TTFT[2]), c.TTFT[2].Verdict},
		{"ITL p50", seconds(float64(a.ITLP50Seconds)), seconds(float64(b.ITLP50Seconds)), "", ""},
		{"ITL p95", seconds(float64(a.ITLP95Seconds)), seconds(float64(b.ITLP95Seconds)), "", ""},
		{"system output tokens/s", rate(a.OutputTokensPerSecond), rate(b.OutputTokensPerSecond), ratio(c.OutputRateRatio), systemVerdict},
	}
	if steady != nil {
		rows = append(rows, steady)
	}
	return append(rows, []string{"per-request tokens/s p50 [95% CI]", speedCI(a.PerRequestOutputTokensPerSecondP50, a.PerRequestOutputTokensPerSecondP50CI),
		speedCI(b.PerRequestOutputTokensPerSecondP50, b.PerRequestOutputTokensPerSecondP50CI), speedDiff(c.PerRequestSpeed), c.PerRequestSpeedVerdict})
}

func speedDiff(c Comparison) string {
	sign := func(x float64) string {
		if x > 0 {
			return "+" + rate(Float(x))
		}
		return rate(Float(x))
	}
	return fmt.Sprintf("%s [%s, %s]", sign(float64(c.Difference)), sign(c.DifferenceCI[0]), sign(c.DifferenceCI[1]))
}

func ratio(x Float) string {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return "n/a"
	}
	return "x" + strconv.FormatFloat(float64(x), 'f', 3, 64)
}

func pairedLine(c Class) string {
	p := c.Paired
	if p.Pairs == 0 {
		return "paired: no pairs in which both arms completed"
	}
	return fmt.Sprintf("paired: B faster in %s of %d pairs (95%% CI %s to %s), median B - A %s (95%% CI %s to %s)",
		percent(float64(p.BFasterShare)), p.Pairs, percent(p.BFasterShareCI[0]), percent(p.BFasterShareCI[1]), signedSeconds(float64(p.MedianDifferenceSeconds)),
		signedSeconds(p.MedianDifferenceCISeconds[0]), signedSeconds(p.MedianDifferenceCISeconds[1]))
}
