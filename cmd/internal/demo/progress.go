package demo

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/exporter"
)

// progress prints one line per load generator report: requests so far, and
// per class A's and B's TTFT p95 (from tandem's native histograms) and
// output tokens/s since the previous line.
type progress struct {
	g      prometheus.Gatherer
	w      io.Writer
	last   time.Duration
	tokens map[string]float64 // class/config -> output tokens at the last line
}

func newProgress(g prometheus.Gatherer, w io.Writer) *progress {
	return &progress{g: g, w: w, tokens: map[string]float64{}}
}

func (p *progress) print(lp loadgen.Progress) {
	if lp.Elapsed-p.last < 2*time.Second && p.last != 0 {
		return
	}
	interval := (lp.Elapsed - p.last).Seconds()
	p.last = lp.Elapsed
	ttft, tokens := p.read()
	var b strings.Builder
	fmt.Fprintf(&b, "%5.0fs  sent %d  done %d  failed %d", lp.Elapsed.Seconds(), lp.Sent, lp.Completed, lp.Failed)
	for _, class := range exporter.BuiltinClasses {
		fmt.Fprintf(&b, "  | %s p95 A %s B %s ms", class, ms(ttft[class+"/A"]), ms(ttft[class+"/B"]))
		for _, arm := range exporter.Arms {
			key := class + "/" + arm
			fmt.Fprintf(&b, " %s %s tok/s", arm, num((tokens[key]-p.tokens[key])/interval))
		}
	}
	p.tokens = tokens
	fmt.Fprintln(p.w, b.String())
}

// read returns the TTFT p95 and output token count per class/config.
func (p *progress) read() (ttft, tokens map[string]float64) {
	ttft, tokens = map[string]float64{}, map[string]float64{}
	g, err := exporter.Gather(p.g)
	if err != nil {
		return ttft, tokens
	}
	key := func(s exporter.Series) string {
		return s.Label(exporter.LabelClass) + "/" + s.Label(exporter.LabelConfig)
	}
	for s := range g.Series(exporter.MetricTimeToFirstToken) {
		ttft[key(s)] = math.NaN()
		if h, err := s.Histogram(); err == nil {
			ttft[key(s)] = h.Quantile(0.95)
		}
	}
	for s := range g.Series(exporter.MetricOutputTokens) {
		tokens[key(s)] = s.Value()
	}
	return ttft, tokens
}
