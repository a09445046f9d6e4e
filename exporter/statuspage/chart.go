package statuspage

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kestrelops/tandem/exporter"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 640
	chartHeight = 200
	chartLeft   = 44
	chartRight  = 28
	chartTop    = 26
	chartBottom = 30
	// chartSchema is the resolution the chart shows: 4 buckets per doubling.
	chartSchema = 2
)

var chartColors = map[string]string{exporter.ConfigProduction: "#8a8a8a", exporter.ConfigA: "#1f6fb4", exporter.ConfigB: "#d2660a"}

// chart is the TTFT distribution chart of one class as the "chart"
// template draws it: share of requests per bucket over a logarithmic time
// axis in milliseconds, with each config's p95 marked.
type chart struct {
	Class                 string
	Width, Height         int
	Left, Top, Right      int // plot edges; Right is its x
	PlotWidth, PlotHeight coord
	Base                  coord // y of the time axis
	Ticks                 []tick
	TickLabelY            coord
	ShareLabelX           int   // right end of the share labels
	TopShare              label // the share at the top of the scale
	ZeroY                 coord // y of the share label 0
	AxisTitleY            coord // middle of the share axis
	Series                []chartSeries
}

// tick is a time on the axis: 1, 2 or 5 times a power of ten.
type tick struct {
	X     coord
	Major bool // a power of ten
	Label string
}

type label struct {
	Y    coord
	Text string
}

// chartSeries is one config's distribution.
type chartSeries struct {
	Config, Color string
	Areas         []area
	// P95X is where the p95 line is drawn; HasP95 is false when there is none.
	P95X   coord
	HasP95 bool
	P95    string
	// Swatch is the top left corner of the legend's colour box, Caption
	// where its text starts.
	Swatch, Caption point
}

// area is a run of adjacent buckets, drawn from Start along Lines and
// closed back to the axis.
type area struct {
	Start point
	Lines []point
}

type point struct{ X, Y coord }

func (p point) String() string { return p.X.String() + " " + p.Y.String() }

// coord is an SVG coordinate, written with one decimal.
type coord float64

func (c coord) String() string { return strconv.FormatFloat(float64(c), 'f', 1, 64) }

// bar is one bucket of a distribution, in milliseconds, with its share of
// all requests of the config.
type bar struct {
	lower, upper, share float64
}

// ttftChart is the chart of the TTFT distributions of A and B (production
// when there are no arms), nil when none has a completed request.
func ttftChart(c ClassStatus) *chart {
	configs := []string{exporter.ConfigA, exporter.ConfigB}
	if !hasConfig(c, exporter.ConfigA) && !hasConfig(c, exporter.ConfigB) {
		configs = []string{exporter.ConfigProduction}
	}
	type distribution struct {
		config string
		bars   []bar
		p95    float64
	}
	var ds []distribution
	lo, hi, top := math.Inf(1), 0.0, 0.0
	for _, config := range configs {
		h := c.ttft[config]
		if h.Count() == 0 {
			continue
		}
		d := distribution{config: config, p95: h.Quantile(0.95) * 1000}
		for b := range h.Reduce(chartSchema).Buckets() {
			if b.Lower <= 0 {
				continue
			}
			r := bar{lower: b.Lower * 1000, upper: b.Upper * 1000, share: b.Count / h.Count()}
			d.bars = append(d.bars, r)
			lo, hi, top = min(lo, r.lower), max(hi, r.upper), max(top, r.share)
		}
		if len(d.bars) > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return nil
	}
	xlo, xhi := niceBelow(lo), niceAbove(hi)
	top *= 1.1
	plotW, plotH := float64(chartWidth-chartLeft-chartRight), float64(chartHeight-chartTop-chartBottom)
	base := float64(chartTop) + plotH
	x := func(ms float64) coord {
		return coord(chartLeft + plotW*(math.Log10(ms)-math.Log10(xlo))/(math.Log10(xhi)-math.Log10(xlo)))
	}
	y := func(share float64) coord { return coord(base - plotH*share/top) }

	ch := &chart{
		Class: c.Class, Width: chartWidth, Height: chartHeight,
		Left: chartLeft, Top: chartTop, Right: chartWidth - chartRight,
		PlotWidth: coord(plotW), PlotHeight: coord(plotH), Base: coord(base),
		TickLabelY:  coord(base + 14),
		ShareLabelX: chartLeft - 4,
		TopShare:    label{Y: y(top/1.1) + 4, Text: fmt.Sprintf("%.0f%%", 100*top/1.1)},
		ZeroY:       coord(base + 4),
		AxisTitleY:  coord(float64(chartTop) + plotH/2),
	}
	for decade := math.Pow(10, math.Floor(math.Log10(xlo))); decade < xhi*1.001; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := decade * m; v >= xlo*0.999 && v <= xhi*1.001 {
				ch.Ticks = append(ch.Ticks, tick{X: x(v), Major: m == 1, Label: formatMillis(v)})
			}
		}
	}
	for i, d := range ds {
		legendX := coord(chartLeft + 150*i)
		s := chartSeries{
			Config: d.config, Color: chartColors[d.config],
			P95X: x(d.p95), HasP95: d.p95 > 0, P95: formatMillis(d.p95),
			Swatch: point{legendX, 5}, Caption: point{legendX + 14, 14},
		}
		prevUpper := math.NaN()
		for _, r := range d.bars {
			if r.lower != prevUpper {
				s.closeArea(x(prevUpper), coord(base))
				s.Areas = append(s.Areas, area{Start: point{x(r.lower), coord(base)}})
			}
			a := &s.Areas[len(s.Areas)-1]
			a.Lines = append(a.Lines, point{x(r.lower), y(r.share)}, point{x(r.upper), y(r.share)})
			prevUpper = r.upper
		}
		s.closeArea(x(prevUpper), coord(base))
		ch.Series = append(ch.Series, s)
	}
	return ch
}

// closeArea ends the last area with a line down to the axis at x.
func (s *chartSeries) closeArea(x, base coord) {
	if len(s.Areas) > 0 {
		a := &s.Areas[len(s.Areas)-1]
		a.Lines = append(a.Lines, point{x, base})
	}
}

var niceSteps = []float64{1, 2, 5, 10}

// niceBelow is the largest 1, 2 or 5 times a power of ten at most v.
func niceBelow(v float64) float64 {
	decade := math.Pow(10, math.Floor(math.Log10(v)))
	for i := len(niceSteps) - 1; i > 0; i-- {
		if decade*niceSteps[i] <= v {
			return decade * niceSteps[i]
		}
	}
	return decade
}

// niceAbove is the smallest 1, 2 or 5 times a power of ten at least v.
func niceAbove(v float64) float64 {
	decade := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range niceSteps {
		if decade*m >= v {
			return decade * m
		}
	}
	return decade * 10
}

func formatMillis(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'g', 3, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
}
