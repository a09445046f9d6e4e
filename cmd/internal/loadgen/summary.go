package loadgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

// ClassMixed names the summary of all requests together.
const ClassMixed = "mixed"

// Summary is the outcome of a run: one row per workload class and one for
// all requests, each computed from individual timings.
type Summary struct {
	// Window runs from the first request sent to the last one finished.
	Window  time.Duration
	Classes []ClassSummary
	Mixed   ClassSummary
}

// ClassSummary describes the requests of one class. Quantiles are NaN when
// no request qualifies.
type ClassSummary struct {
	Class     string
	Scheduled int
	Dropped   int
	Completed int
	// Failed counts sent requests that did not complete.
	Failed int
	// TTFT quantiles in seconds, over completed requests with a first token.
	TTFTP50, TTFTP95, TTFTP99 float64
	// OutputTokens is the total over completed requests; OutputRate is that
	// total divided by the summary's window.
	OutputTokens int
	OutputRate   float64
	// SpeedP50 is the median per-request output speed, tokens per second
	// after the first token.
	SpeedP50 float64
}

// Summarize computes the summary of results.
func Summarize(results []Result) *Summary {
	s := &Summary{}
	var first, last time.Time
	for _, r := range results {
		if r.Sent.IsZero() {
			continue
		}
		end := r.Sent.Add(time.Duration(r.DurationSeconds * float64(time.Second)))
		if first.IsZero() || r.Sent.Before(first) {
			first = r.Sent
		}
		if end.After(last) {
			last = end
		}
	}
	s.Window = last.Sub(first)
	byClass := map[string][]Result{}
	for _, r := range results {
		byClass[r.Class] = append(byClass[r.Class], r)
	}
	for _, c := range slices.Sorted(maps.Keys(byClass)) {
		s.Classes = append(s.Classes, summarizeClass(c, byClass[c], s.Window))
	}
	s.Mixed = summarizeClass(ClassMixed, results, s.Window)
	return s
}

func summarizeClass(class string, results []Result, window time.Duration) ClassSummary {
	s := quantile.SamplesOf(results, Result.Observation)
	cs := ClassSummary{
		Class:        class,
		Scheduled:    len(results),
		Completed:    s.Completed,
		OutputTokens: s.OutputTokens,
		TTFTP50:      quantile.Of(s.TTFT, 0.5),
		TTFTP95:      quantile.Of(s.TTFT, 0.95),
		TTFTP99:      quantile.Of(s.TTFT, 0.99),
		SpeedP50:     quantile.Of(s.Speed, 0.5),
	}
	for _, r := range results {
		if r.Outcome == OutcomeDropped {
			cs.Dropped++
		}
	}
	cs.Failed = cs.Scheduled - cs.Dropped - cs.Completed
	if window > 0 {
		cs.OutputRate = float64(cs.OutputTokens) / window.Seconds()
	}
	return cs
}

// WriteText prints the summary as a table.
func (s *Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tscheduled\tdropped\tcompleted\tfailed\tTTFT p50 ms\tTTFT p95 ms\tTTFT p99 ms\toutput tok/s\tspeed p50 tok/s\t")
	for _, c := range append(slices.Clone(s.Classes), s.Mixed) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f\t%s\t\n",
			c.Class, c.Scheduled, c.Dropped, c.Completed, c.Failed,
			millis(c.TTFTP50), millis(c.TTFTP95), millis(c.TTFTP99), c.OutputRate, number(c.SpeedP50))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "window %.1fs, first request sent to last finished\n", s.Window.Seconds())
	return err
}

func millis(seconds float64) string { return number(seconds * 1000) }

func number(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// WriteResults writes one JSON line per result.
func WriteResults(w io.Writer, results []Result) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}
