package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/e2e"
	"github.com/kestrelops/tandem/dashboards"
	"github.com/kestrelops/tandem/deploy/rules"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
)

// TestEndToEndTwoExperiments runs two demos at once, scraped by one
// Prometheus as two deployments: "regression" (the demo's B, slower on fresh
// prompts and faster on repeated prefixes) and "aa" (B is A). Rules,
// dashboards and the report must keep them apart.
func TestEndToEndTwoExperiments(t *testing.T) {
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yml")
	// The same short-window thresholds as startDemoRun (see there).
	tandem(t, "rules", "--out", rulesFile, "--evaluation-interval", "1s", "--window", "30s", "--min-completed", fmt.Sprint(e2eMinCompleted),
		"--ttft-regression", fmt.Sprint(4*verdict.Margin), "--ttft-regression-for", "5s", "--output-rate-regression-for", "0s", "--shadow-errors-for", "0s",
		"--mirror-saturated-for", "0s", "--token-mismatch-for", "0s", "--production-ttft-for", "0s")

	experiments := []struct {
		job, experiment string
		args            []string
		metricsAddr     string
	}{
		{job: "tandem-regression", experiment: "prefix-cache"},
		{job: "tandem-aa", args: []string{"--b-profile", "a"}},
	}
	var scrapes []e2e.Scrape
	for i := range experiments {
		e := &experiments[i]
		e.metricsAddr = e2e.FreeAddr(t)
		s := e2e.Scrape{Job: e.job, Targets: []string{e.metricsAddr}}
		if e.experiment != "" {
			s.Labels = map[string]string{"experiment": e.experiment}
		}
		scrapes = append(scrapes, s)
	}
	prom := e2e.StartPrometheusConfig(t, e2e.PrometheusConfig{Scrapes: scrapes, RulesFile: rulesFile})

	var wg sync.WaitGroup
	errs := make([]error, len(experiments))
	outs := make([]string, len(experiments))
	for i, e := range experiments {
		args := append([]string{"demo", "--duration", "30s", "--rate", "8", "--no-report",
			"--listen-addr", e2e.FreeAddr(t), "--metrics-addr", e.metricsAddr, "--linger", "3s"}, e.args...)
		wg.Go(func() {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, tandemBin, args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			errs[i], outs[i] = cmd.Run(), out.String()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("demo %s: %v\n%s", experiments[i].job, err, outs[i])
		}
	}
	end := time.Now().Add(-time.Second)

	t.Run("rules record each experiment apart", func(t *testing.T) {
		vec := prom.Vector(t, rules.TTFTP95, end, "job", "experiment", "config", "class")
		for _, key := range []string{"tandem-regression/prefix-cache/A/fresh", "tandem-regression/prefix-cache/B/fresh", "tandem-aa//A/fresh", "tandem-aa//B/fresh"} {
			if _, ok := vec[key]; !ok {
				t.Errorf("%s has no series %s: %v", rules.TTFTP95, key, vec)
			}
		}
	})

	t.Run("the regression alerts for its own experiment only", func(t *testing.T) {
		vec := prom.Vector(t, `max_over_time(ALERTS{alertstate="firing"}[5m])`, end, "alertname", "job", "class")
		if _, ok := vec[rules.AlertTTFTRegression+"/tandem-regression/"+exporter.ClassFresh]; !ok {
			t.Errorf("no %s for tandem-regression/fresh; fired: %v", rules.AlertTTFTRegression, keys(vec))
		}
		for k := range vec {
			if strings.Contains(k, "/tandem-aa/") {
				t.Errorf("the A/A experiment alerted: %s", k)
			}
		}
	})

	t.Run("dashboards show the chosen experiment", func(t *testing.T) {
		queries, err := dashboards.Queries()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range experiments {
			vars := dashboards.DefaultVariables()
			vars["window"], vars["job"], vars["experiment"] = []string{"1m"}, []string{e.job}, []string{e.experiment}
			expr := dashboards.ExpandVariables(queries[0].Expr, vars)
			got := prom.Vector(t, expr, end, "job")
			if len(got) != 1 || got[e.job] == nil {
				t.Errorf("%s: %s returned %v, want the series of %s alone", queries[0].Panel, expr, keys(got), e.job)
			}
		}
	})

	report := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(tandemBin, append([]string{"report", "--prometheus", prom.URL, "--window", "10m",
			"--end", end.Format(time.RFC3339), "--min-pairs", "30", "--format", "json"}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String() + stderr.String(), err
	}

	t.Run("report names the experiments when none is chosen", func(t *testing.T) {
		out, err := report()
		if err == nil {
			t.Fatalf("report over two experiments succeeded:\n%s", out)
		}
		for _, want := range []string{"2 tandem experiments match any experiment", "--job tandem-aa", "--job tandem-regression --experiment prefix-cache"} {
			if !strings.Contains(out, want) {
				t.Errorf("report error lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("report on one experiment reads it alone", func(t *testing.T) {
		verdicts := map[string]map[string]string{}
		for _, job := range []string{"tandem-regression", "tandem-aa"} {
			out, err := report("--job", job)
			if err != nil {
				t.Fatalf("report --job %s: %v\n%s", job, err, out)
			}
			var rep struct {
				Classes []struct {
					Class       string `json:"class"`
					TTFTVerdict string `json:"ttft_p95_verdict"`
				} `json:"classes"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("report JSON: %v\n%s", err, out)
			}
			verdicts[job] = map[string]string{}
			for _, c := range rep.Classes {
				verdicts[job][c.Class] = c.TTFTVerdict
			}
		}
		// Merged with the regression's data, A/A would read B faster on
		// repeated prefixes.
		if v := verdicts["tandem-regression"][exporter.ClassRepeatedPrefix]; v != "faster" {
			t.Errorf("tandem-regression repeated_prefix: TTFT verdict %q, want faster", v)
		}
		for class, v := range verdicts["tandem-aa"] {
			if v == "faster" || v == "slower" {
				t.Errorf("tandem-aa %s: TTFT verdict %q for identical arms", class, v)
			}
		}
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
