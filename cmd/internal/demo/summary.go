package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/exporter"
)

// Mixed is the summary key of all classes together.
const Mixed = report.MixedClass

// ArmSummary is one arm's figures for one class or for the mix, as the
// report computed them from individual timings.
type ArmSummary struct {
	Completed int     `json:"completed"`
	TTFTP50   float64 `json:"ttft_p50_seconds"`
	TTFTP95   float64 `json:"ttft_p95_seconds"`
	TTFTP99   float64 `json:"ttft_p99_seconds"`
	// OutputRate is the system output rate: output tokens of completed
	// requests / (first request start to last response end).
	OutputRate float64 `json:"output_tokens_per_second"`
	// SpeedP50 is the median per-request output speed: tokens per second
	// of one stream after its first token.
	SpeedP50 float64 `json:"per_request_output_tokens_per_second_p50"`
}

// Summary is what the demo prints at the end: the report's figures, and the
// wrong number the report never shows.
type Summary struct {
	Classes map[string]map[string]ArmSummary `json:"classes"`
	// AverageOfClassP95 is the wrong number: the mean of the class p95s,
	// printed beside the merged p95 to show why dashboards never average.
	AverageOfClassP95 map[string]float64 `json:"average_of_class_p95_seconds"`
	// OutputRateCase says whether both arms kept up with all the traffic,
	// judged by report.KeepUp on its steady-state window: one of
	// report.OutputRateTie, OutputRateAFellBehind, OutputRateBFellBehind,
	// OutputRateTooShort.
	OutputRateCase string `json:"output_rate_case"`
	// SteadyOutputRate is each arm's output rate over all traffic in that
	// window, by arm; an arm without one is left out.
	SteadyOutputRate map[string]float64 `json:"steady_output_tokens_per_second"`
	// Interrupted says that the load was ended early: requests in flight
	// then may have finished on one arm and not the other, so the arms'
	// request sets are unmatched.
	Interrupted bool `json:"interrupted"`

	order  []string
	keepUp report.KeepUpResult
}

// Summarize renders rep, the report of the demo's records; nil (no report)
// gives an empty summary.
func Summarize(rep *report.Report) *Summary {
	s := &Summary{Classes: map[string]map[string]ArmSummary{}, AverageOfClassP95: map[string]float64{}, SteadyOutputRate: map[string]float64{}}
	if rep == nil {
		return s
	}
	for _, c := range append(slices.Clone(rep.Classes), rep.Mixed) {
		s.order = append(s.order, c.Class)
		s.Classes[c.Class] = map[string]ArmSummary{}
		for _, arm := range exporter.Arms {
			s.Classes[c.Class][arm] = armSummary(c.Arms[arm])
		}
	}
	s.keepUp, _ = rep.Mixed.KeepUp()
	s.OutputRateCase = s.keepUp.Case
	for _, arm := range exporter.Arms {
		if v := float64(rep.Mixed.Arms[arm].SteadyOutputTokensPerSecond); !math.IsNaN(v) && !math.IsInf(v, 0) {
			s.SteadyOutputRate[arm] = v
		}
		var sum float64
		var n int
		for _, c := range rep.Classes {
			if a := c.Arms[arm]; a.Completed > 0 {
				sum += float64(a.TTFTP95Seconds)
				n++
			}
		}
		if n > 0 {
			s.AverageOfClassP95[arm] = sum / float64(n)
		}
	}
	return s
}

func armSummary(a report.Arm) ArmSummary {
	return ArmSummary{
		Completed:  a.Completed,
		TTFTP50:    float64(a.TTFTP50Seconds),
		TTFTP95:    float64(a.TTFTP95Seconds),
		TTFTP99:    float64(a.TTFTP99Seconds),
		OutputRate: float64(a.OutputTokensPerSecond),
		SpeedP50:   float64(a.PerRequestOutputTokensPerSecondP50),
	}
}

// WriteText prints the summary as a table, then the two numbers the
// dashboards are built to keep apart.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintln(w, "Summary (from tandem's per-request records of A and B):")
	if s.Interrupted {
		fmt.Fprintln(w, "Interrupted: the load ended early, so requests in flight then may have finished on one arm and not the other; the arms' request sets are unmatched, and the figures below are not like for like.")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tarm\tcompleted\tTTFT p50 ms\tTTFT p95 ms\tTTFT p99 ms\tsystem output tok/s\tper-request tok/s p50\t")
	for _, class := range s.order {
		for _, arm := range exporter.Arms {
			a := s.Classes[class][arm]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", class, arm, a.Completed,
				ms(a.TTFTP50), ms(a.TTFTP95), ms(a.TTFTP99), num(a.OutputRate), num(a.SpeedP50))
		}
	}
	tw.Flush()

	if mixed, ok := s.Classes[Mixed]; ok {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Mixed-traffic TTFT p95 of each arm:")
		for _, arm := range exporter.Arms {
			fmt.Fprintf(w, "  %s: %s ms, from the merged distribution of all requests (the right number); WRONG: %s ms, the average of the class p95s, is the p95 of no traffic\n",
				arm, ms(mixed[arm].TTFTP95), ms(s.AverageOfClassP95[arm]))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "System output rate (output tokens / first request start to last response end): A %s tok/s, B %s tok/s.\n",
			num(mixed[exporter.ConfigA].OutputRate), num(mixed[exporter.ConfigB].OutputRate))
		fmt.Fprintln(w, s.rateSituation())
	}
}

// rateSituation says which of the open-loop situations the steady-state
// output rates show, or why they cannot tell.
func (s *Summary) rateSituation() string {
	mixed := s.Classes[Mixed]
	if mixed[exporter.ConfigA].Completed == 0 || mixed[exporter.ConfigB].Completed == 0 {
		return "Not enough completed requests to compare."
	}
	k := s.keepUp
	if k.Case == report.OutputRateTooShort {
		return "Too short to judge capacity: " + k.TooShortReason() + ". The rates above count each arm's ramp-up and drain, which last longer on the arm with slower streams; run longer to judge whether both arms kept up."
	}
	steady := fmt.Sprintf("In the steady-state window (%.0f s, from first start + %.1f s warm-up, the larger p95 request duration, to last start) A delivered %s tok/s and B %s tok/s",
		k.Seconds(), k.WarmUp.Seconds(), num(k.Arms[exporter.ConfigA].OutputTokensPerSecond), num(k.Arms[exporter.ConfigB].OutputTokensPerSecond))
	switch k.Case {
	case report.OutputRateTie:
		if math.Abs(k.Ratio()-1) > report.DefaultOptions().RateTolerance {
			return steady + ": the lower still delivered the arrivals' rate (the other drained a backlog built before the window), so both arms kept up and this load says nothing about capacity; per-request speed is what separates them."
		}
		return steady + ": they tie, so both arms kept up with the same arrivals and this load says nothing about capacity; per-request speed is what separates them."
	case report.OutputRateAFellBehind:
		return steady + fmt.Sprintf(": %s fell behind the arrivals (its backlog grew), a capacity difference at this load.", exporter.ConfigA)
	case report.OutputRateBFellBehind:
		return steady + fmt.Sprintf(": %s fell behind the arrivals (its backlog grew), a capacity difference at this load.", exporter.ConfigB)
	}
	return "Not enough completed requests to compare."
}

// WriteJSONFile writes the summary as JSON.
func (s *Summary) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// MarshalJSON writes a figure without data as null.
func (a ArmSummary) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Completed  int          `json:"completed"`
		TTFTP50    report.Float `json:"ttft_p50_seconds"`
		TTFTP95    report.Float `json:"ttft_p95_seconds"`
		TTFTP99    report.Float `json:"ttft_p99_seconds"`
		OutputRate report.Float `json:"output_tokens_per_second"`
		SpeedP50   report.Float `json:"per_request_output_tokens_per_second_p50"`
	}{a.Completed, report.Float(a.TTFTP50), report.Float(a.TTFTP95), report.Float(a.TTFTP99), report.Float(a.OutputRate), report.Float(a.SpeedP50)})
}

func ms(seconds float64) string { return num(seconds * 1000) }

func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}
