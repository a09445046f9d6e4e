package report

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"
)

const promWindow = 30 * time.Minute

var promEnd = t0.Add(time.Hour)

// promFixture is what a Prometheus scraping tandem would answer for the
// increase over the window: histograms built from records with schema 4
// buckets, and counters given directly.
type promFixture struct {
	recs         []record.Record
	outputTokens map[[2]string]float64 // by config, class
	production   map[string]float64
	skipped      float64
	schedP99     float64 // seconds; 0: the runtime metric is absent
	// experiments are the identities exposing tandem_build_info; nil is one
	// tandem without identity labels. Every other query must select the
	// first.
	experiments []map[string]string
}

func (f promFixture) vector(t *testing.T, query string) model.Vector {
	sample := func(labels map[string]string, v float64) *model.Sample {
		m := model.Metric{}
		for k, val := range labels {
			m[model.LabelName(k)] = model.LabelValue(val)
		}
		return &model.Sample{Metric: m, Value: model.SampleValue(v), Timestamp: model.TimeFromUnixNano(promEnd.UnixNano())}
	}
	histogramOf := func(labels map[string]string, xs []float64) *model.Sample {
		s := sample(labels, 0)
		s.Histogram = nativeHistogram(4, xs...)
		return s
	}
	armValues := func(value func(record.Record) (float64, bool)) model.Vector {
		var out model.Vector
		for _, class := range exporter.BuiltinClasses {
			for _, config := range exporter.Arms {
				var xs []float64
				for _, r := range f.recs {
					if r.Class == class && r.Config == config && r.Outcome == exporter.OutcomeCompleted {
						if x, ok := value(r); ok {
							xs = append(xs, x)
						}
					}
				}
				out = append(out, histogramOf(map[string]string{exporter.LabelConfig: config, exporter.LabelClass: class}, xs))
			}
		}
		return out
	}
	type pair struct{ a, b record.Record }
	pairs := map[string]*pair{}
	for _, r := range f.recs {
		if pairs[r.PairID] == nil {
			pairs[r.PairID] = &pair{}
		}
		if r.Config == exporter.ConfigA {
			pairs[r.PairID].a = r
		} else {
			pairs[r.PairID].b = r
		}
	}
	var out model.Vector
	if strings.HasPrefix(query, "sum by (job, namespace, experiment) (max_over_time("+exporter.MetricBuildInfo) {
		if f.experiments == nil {
			return model.Vector{sample(nil, 1)}
		}
		for _, e := range f.experiments {
			if matches(query, e) {
				out = append(out, sample(e, 1))
			}
		}
		return out
	}
	if f.experiments != nil {
		for l, v := range f.experiments[0] {
			if !strings.Contains(query, l+"=\""+v+"\"") {
				t.Errorf("query %q does not select %s=%q", query, l, v)
			}
		}
	}
	switch {
	case strings.Contains(query, "go_sched_latencies_seconds"):
		if f.schedP99 > 0 {
			out = append(out, sample(nil, f.schedP99))
		}
	case strings.Contains(query, exporter.MetricTimeToFirstToken):
		return armValues(func(r record.Record) (float64, bool) { return r.TTFTSeconds, r.FirstToken })
	case strings.Contains(query, exporter.MetricInterTokenLatency):
		return armValues(func(r record.Record) (float64, bool) {
			s, ok := r.Observation().OutputSpeed()
			return 1 / s, ok
		})
	case strings.Contains(query, exporter.MetricTTFTDifference):
		diffs := map[string][]float64{}
		for _, p := range pairs {
			diffs[p.a.Class] = append(diffs[p.a.Class], p.b.TTFTSeconds-p.a.TTFTSeconds)
		}
		for class, xs := range diffs {
			out = append(out, histogramOf(map[string]string{exporter.LabelClass: class}, xs))
		}
	case strings.Contains(query, exporter.MetricOutputTokens):
		for k, v := range f.outputTokens {
			out = append(out, sample(map[string]string{exporter.LabelConfig: k[0], exporter.LabelClass: k[1]}, v))
		}
	case strings.Contains(query, exporter.MetricRequests) && strings.Contains(query, `"`+exporter.ConfigProduction+`"`):
		for class, v := range f.production {
			out = append(out, sample(map[string]string{exporter.LabelClass: class}, v))
		}
	case strings.Contains(query, exporter.MetricRequests):
		n := map[[2]string]float64{}
		for _, r := range f.recs {
			if r.Outcome == exporter.OutcomeCompleted {
				n[[2]string{r.Config, r.Class}]++
			}
		}
		for k, v := range n {
			out = append(out, sample(map[string]string{exporter.LabelConfig: k[0], exporter.LabelClass: k[1]}, v))
		}
	case strings.Contains(query, exporter.MetricPairOutputTokensMismatch):
		for _, class := range exporter.BuiltinClasses {
			out = append(out, sample(map[string]string{exporter.LabelClass: class}, 0))
		}
	case strings.Contains(query, exporter.MetricPairs):
		n := map[[2]string]float64{}
		for _, p := range pairs {
			n[[2]string{p.a.Class, exporter.PairResult(p.a.Outcome == exporter.OutcomeCompleted, p.b.Outcome == exporter.OutcomeCompleted)}]++
		}
		for k, v := range n {
			out = append(out, sample(map[string]string{exporter.LabelClass: k[0], exporter.LabelResult: k[1]}, v))
		}
	case strings.Contains(query, exporter.MetricMirrorSkipped):
		out = append(out, sample(nil, f.skipped))
	default:
		t.Errorf("unexpected query %s", query)
	}
	return out
}

// matches reports whether every label matcher of query that names a label of
// e selects e's value.
func matches(query string, e map[string]string) bool {
	for _, l := range []string{"job", "namespace", "experiment"} {
		if i := strings.Index(query, l+`="`); i >= 0 {
			v, _, _ := strings.Cut(query[i+len(l)+2:], `"`)
			if v != e[l] {
				return false
			}
		}
	}
	return true
}

// fakePrometheus serves /api/v1/query from f, checking that every query
// parses as PromQL and is evaluated at promEnd.
func fakePrometheus(t *testing.T, f promFixture) (v1.API, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		query := r.Form.Get("query")
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(query); err != nil {
			t.Errorf("query %q does not parse: %v", query, err)
		}
		if got, want := r.Form.Get("time"), strconv.FormatInt(promEnd.Unix(), 10); got != want {
			t.Errorf("query %q at time %q, want %q", query, got, want)
		}
		if !strings.Contains(query, "[30m]") {
			t.Errorf("query %q is not over the 30m window", query)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"status": "success",
			"data":   map[string]any{"resultType": "vector", "result": f.vector(t, query)},
		})
	}))
	t.Cleanup(srv.Close)
	client, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(client), srv.URL
}

// seedPrometheus is the seed question's matched runs as Prometheus sees
// them over one window: A fell behind, so it delivered fewer tokens.
func seedPrometheus() promFixture {
	w := promWindow.Seconds()
	return promFixture{
		recs: seedRecords(),
		outputTokens: map[[2]string]float64{
			{exporter.ConfigA, exporter.ClassFresh}: 800 * w, {exporter.ConfigB, exporter.ClassFresh}: 920 * w,
			{exporter.ConfigA, exporter.ClassRepeatedPrefix}: 880 * w, {exporter.ConfigB, exporter.ClassRepeatedPrefix}: 1000 * w,
		},
		production: map[string]float64{exporter.ClassFresh: 4000, exporter.ClassRepeatedPrefix: 4000},
		skipped:    40,
	}
}

func TestFromPrometheus(t *testing.T) {
	promAPI, _ := fakePrometheus(t, seedPrometheus())
	r, err := FromPrometheus(context.Background(), promAPI, promWindow, promEnd, Experiment{}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	exact := fromRecords(t, seedRecords())
	if len(r.Classes) != 2 {
		t.Fatalf("classes = %d, want 2", len(r.Classes))
	}
	for i, c := range r.Classes {
		e := exact.Classes[i]
		for _, config := range exporter.Arms {
			got, want := float64(c.Arms[config].TTFTP95Seconds), float64(e.Arms[config].TTFTP95Seconds)
			if got < want/bucketRatio || got > want*bucketRatio {
				t.Errorf("%s %s: TTFT p95 %g from buckets, %g from records: more than a bucket apart", c.Class, config, got, want)
			}
			ci, eci := c.Arms[config].TTFTP95CISeconds, e.Arms[config].TTFTP95CISeconds
			if ci[0] > eci[0] || ci[1] < eci[1] {
				t.Errorf("%s %s: TTFT p95 CI %v from buckets does not contain %v from records", c.Class, config, ci, eci)
			}
			speed, espeed := float64(c.Arms[config].PerRequestOutputTokensPerSecondP50), float64(e.Arms[config].PerRequestOutputTokensPerSecondP50)
			if speed < espeed/bucketRatio || speed > espeed*bucketRatio {
				t.Errorf("%s %s: per-request speed p50 %g from 1/ITL p50, %g from records", c.Class, config, speed, espeed)
			}
		}
		if c.TTFTP95Verdict != e.TTFTP95Verdict || c.OutputRateVerdict != Higher || c.PerRequestSpeedVerdict != Higher {
			t.Errorf("%s: verdicts TTFT %q rate %q speed %q; want %q, higher, higher", c.Class, c.TTFTP95Verdict, c.OutputRateVerdict, c.PerRequestSpeedVerdict, e.TTFTP95Verdict)
		}
		if !near(float64(c.OutputRateRatio), float64(e.OutputRateRatio)) {
			t.Errorf("%s: output rate ratio %g, want %g", c.Class, c.OutputRateRatio, e.OutputRateRatio)
		}
		if c.Paired.Pairs != 400 || c.Paired.BFasterShare != e.Paired.BFasterShare {
			t.Errorf("%s: paired %+v, want 400 pairs and B faster share %g", c.Class, c.Paired, e.Paired.BFasterShare)
		}
	}
	if got := r.Mixed.Arms[exporter.ConfigA].Completed; got != 800 {
		t.Errorf("mixed A completed = %d, want 800", got)
	}
	if r.Mixed.Withheld != "" || r.Mixed.TTFTP95Verdict != Slower {
		t.Errorf("mixed withheld %q, verdict %q; want slower from the merged histograms", r.Mixed.Withheld, r.Mixed.TTFTP95Verdict)
	}
	if got := float64(r.Validity.SkippedShare); !near(got, 40.0/840) {
		t.Errorf("skipped share = %g, want %g", got, 40.0/840)
	}
	if !r.Window.End.Equal(promEnd) || !r.Window.Start.Equal(promEnd.Add(-promWindow)) {
		t.Errorf("window = %+v", r.Window)
	}
	wantContains(t, "decision", r.Decision,
		"fresh: B raised the system output rate (920 vs 800 tokens/s, +15.0%; over the same query window: A fell behind the arrivals)",
		"For the observed traffic mix (fresh 50.0%, repeated_prefix 50.0%)",
		"This holds for this mix only: TTFT p95 changes direction between classes")
	wantContains(t, "because", r.Because, "output rates over the same query window differ by 15.0%, beyond the 2.0% tie tolerance: A fell behind")
	wantNotContains(t, "report", render(t, r, "text"), "steady-state")
	wantContains(t, "warnings", strings.Join(r.Validity.Warnings, "\n"), "4.8% of sampled requests were skipped")
	wantContains(t, "definitions", strings.Join(r.Definitions, "\n"), "1 / inter-token latency p50")
}

// bucketRatio is the width of a schema 4 bucket, upper over lower bound.
var bucketRatio = 1.0442737824274138

func TestFromPrometheusErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
	}))
	defer srv.Close()
	client, _ := api.NewClient(api.Config{Address: srv.URL})
	_, err := FromPrometheus(context.Background(), v1.NewAPI(client), promWindow, promEnd, Experiment{}, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "parse error") || !strings.Contains(err.Error(), exporter.MetricBuildInfo) {
		t.Errorf("err = %v, want the failing query and Prometheus' error", err)
	}

	empty, _ := fakePrometheus(t, promFixture{})
	if _, err := FromPrometheus(context.Background(), empty, promWindow, promEnd, Experiment{}, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "no mirrored traffic") {
		t.Errorf("empty Prometheus: err = %v", err)
	}
}

// TestFromPrometheusSelectsOneExperiment: two experiments scraped by one
// Prometheus are never merged; the report names them until one is chosen.
func TestFromPrometheusSelectsOneExperiment(t *testing.T) {
	f := seedPrometheus()
	f.experiments = []map[string]string{
		{"job": "tandem", "namespace": "team-a", "experiment": "prefix-cache"},
		{"job": "tandem", "namespace": "team-b", "experiment": ""},
	}
	promAPI, _ := fakePrometheus(t, f)
	_, err := FromPrometheus(context.Background(), promAPI, promWindow, promEnd, Experiment{Job: "tandem"}, DefaultOptions())
	want := "2 tandem experiments match --job tandem; choose one with --job, --namespace and --experiment:\n" +
		"  --job tandem --namespace team-a --experiment prefix-cache\n" +
		"  --job tandem --namespace team-b"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want\n%s", err, want)
	}
	r, err := FromPrometheus(context.Background(), promAPI, promWindow, promEnd, Experiment{Namespace: "team-a"}, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Classes) != 2 {
		t.Errorf("classes = %d, want 2", len(r.Classes))
	}
	_, err = FromPrometheus(context.Background(), promAPI, promWindow, promEnd, Experiment{Namespace: "team-c"}, DefaultOptions())
	if err == nil || !strings.Contains(err.Error(), "no tandem matching --namespace team-c") {
		t.Errorf("err = %v, want no tandem matching --namespace team-c", err)
	}
}

func TestFromPrometheusSaysWhenTandemWasBusy(t *testing.T) {
	for _, tc := range []struct {
		p99  float64
		busy bool
	}{{0, false}, {0.0002, false}, {0.0045, true}} {
		f := seedPrometheus()
		f.schedP99 = tc.p99
		promAPI, _ := fakePrometheus(t, f)
		r, err := FromPrometheus(context.Background(), promAPI, promWindow, promEnd, Experiment{}, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		busy := slices.ContainsFunc(r.Validity.Warnings, func(w string) bool { return strings.Contains(w, "tandem itself was busy: its goroutines waited 4.5ms") })
		if busy != tc.busy {
			t.Errorf("scheduling p99 %gs: busy warning %v, want %v: %q", tc.p99, busy, tc.busy, r.Validity.Warnings)
		}
	}
}
