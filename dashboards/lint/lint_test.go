package lint

import (
	"slices"
	"strings"
	"testing"
)

const (
	ttftFresh    = `rate(tandem_time_to_first_token_seconds{class="fresh"}[5m])`
	ttftRepeated = `rate(tandem_time_to_first_token_seconds{class="repeated_prefix"}[5m])`
)

func TestCheckAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		expr  string
		mixed bool
	}{
		{"quantile per config and class", `histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds{class=~"(fresh|repeated_prefix)"}[5m])))`, false},
		{"increase instead of rate", `histogram_quantile(0.5, sum by (class, config) (increase(tandem_inter_token_latency_seconds[1h])))`, false},
		{"mixed merges classes", `histogram_quantile(0.95, sum by (config) (rate(tandem_time_to_first_token_seconds[5m])))`, true},
		{"paired difference by class", `histogram_quantile(0.5, sum by (class) (rate(tandem_ttft_difference_seconds[5m])))`, false},
		{"fraction of paired difference", `histogram_fraction(-Inf, 0, sum by (class) (rate(tandem_ttft_difference_seconds[5m])))`, false},
		{"count may merge classes", `histogram_count(sum by (config) (rate(tandem_request_duration_seconds[5m])))`, false},
		{"raw histogram for a heatmap", `sum by (config, class) (rate(tandem_time_to_first_token_seconds{config="A"}[5m]))`, false},
		{"quantile scaled by a constant", `1000 * histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds[5m])))`, false},
		{"parenthesised sum", `histogram_quantile(0.95, (sum by (config, class) (rate(tandem_time_to_first_token_seconds[5m]))))`, false},
		{"counter ratio", `sum by (config, class) (rate(tandem_cached_prompt_tokens_total[5m])) / sum by (config, class) (rate(tandem_prompt_tokens_total[5m]))`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(tc.expr, tc.mixed); err != nil {
				t.Errorf("Check(%q, %v) = %v, want nil", tc.expr, tc.mixed, err)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		expr  string
		mixed bool
		want  string
	}{
		{"unparsable", `histogram_quantile(0.95, sum by (config, class) (rate(x[5m]))`, false, "parse"},
		{"unexpanded variable", `rate(tandem_requests_total[$window])`, false, "parse"},
		{"averaged p95", `avg(histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)))`, true, "avg is applied to a histogram_quantile result"},
		{"averaged p95 by config", `avg by (config) (histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)))`, false, "avg is applied"},
		{"max of quantiles", `max(histogram_quantile(0.99, sum by (config, class) (` + ttftFresh + `)))`, false, "max is applied"},
		{"quantile of quantiles", `quantile(0.5, histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)))`, false, "quantile is applied"},
		{"aggregation through arithmetic", `sum(2 * histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)))`, false, "sum is applied"},
		{"two quantiles averaged by arithmetic",
			`(histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)) + histogram_quantile(0.95, sum by (config, class) (` + ttftRepeated + `))) / 2`,
			false, "+ combines two histogram_quantile results"},
		{"two quantiles divided", `histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)) / on (config) group_left histogram_quantile(0.95, sum by (config, class) (` + ttftRepeated + `))`, false, "/ combines two histogram_quantile results"},
		{"quantile over time", `avg_over_time(histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `))[1h:1m])`, false, "avg_over_time is applied"},
		{"max quantile over time", `max_over_time((1 * histogram_quantile(0.95, sum by (config, class) (` + ttftFresh + `)))[1h:])`, false, "max_over_time is applied"},
		{"classic bucket selector", `histogram_quantile(0.95, sum by (config, class, le) (rate(tandem_time_to_first_token_seconds_bucket[5m])))`, false, "_bucket"},
		{"le matcher", `sum(rate(tandem_time_to_first_token_seconds{le="0.5"}[5m]))`, false, "matches on le"},
		{"grouping by le", `sum by (le) (rate(tandem_requests_total[5m]))`, false, "uses le"},
		{"vector matching on le", `sum by (config) (rate(tandem_requests_total[5m])) / on (le) sum by (config) (rate(tandem_requests_total[5m]))`, false, "matches on le"},
		{"class grouped away", `histogram_quantile(0.95, sum by (config) (rate(tandem_time_to_first_token_seconds[5m])))`, false, "must group by class"},
		{"config grouped away", `histogram_quantile(0.95, sum by (class) (rate(tandem_time_to_first_token_seconds[5m])))`, false, "must group by config"},
		{"config grouped away in mixed", `histogram_quantile(0.95, sum(rate(tandem_time_to_first_token_seconds[5m])))`, true, "must group by config"},
		{"paired difference without class", `histogram_fraction(-Inf, 0, sum(rate(tandem_ttft_difference_seconds[5m])))`, true, "must group by class"},
		{"no sum", `histogram_quantile(0.95, rate(tandem_time_to_first_token_seconds[5m]))`, false, "must take sum by"},
		{"sum without", `histogram_quantile(0.95, sum without (instance) (rate(tandem_time_to_first_token_seconds[5m])))`, false, "must take sum by"},
		{"max instead of sum", `histogram_quantile(0.95, max by (config, class) (rate(tandem_time_to_first_token_seconds[5m])))`, false, "must take sum by"},
		{"no rate", `histogram_quantile(0.95, sum by (config, class) (tandem_time_to_first_token_seconds))`, false, "does not wrap rate"},
		{"not a tandem histogram", `histogram_quantile(0.95, sum by (config, class) (rate(http_request_duration_seconds[5m])))`, false, "not a tandem native histogram"},
		{"count of a counter", `histogram_count(sum by (config) (rate(tandem_requests_total[5m])))`, false, "not a tandem native histogram"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.expr, tc.mixed)
			if err == nil {
				t.Fatalf("Check(%q, %v) = nil, want an error containing %q", tc.expr, tc.mixed, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check(%q, %v) = %q, want it to contain %q", tc.expr, tc.mixed, err, tc.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	got, err := Metrics(`sum by (class) (rate(tandem_pairs_total[5m])) / sum by (class) (rate(tandem_pairs_total[5m])) + on (class) histogram_count(sum by (class) (rate({__name__="tandem_ttft_difference_seconds"}[5m])))`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tandem_pairs_total", "tandem_ttft_difference_seconds"}
	if !slices.Equal(got, want) {
		t.Errorf("Metrics = %v, want %v", got, want)
	}
	if _, err := Metrics("sum("); err == nil {
		t.Error("Metrics of an unparsable query returned no error")
	}
}

func TestCheckPanel(t *testing.T) {
	const quantile = `{"expr": "histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds[5m])))"}`
	for _, tc := range []struct {
		name  string
		model string
		want  string // empty: no error
	}{
		{"plain quantile panel", `{"title": "p95", "targets": [` + quantile + `], "options": {"legend": {"calcs": []}}}`, ""},
		{"last value of a quantile", `{"title": "p95", "targets": [` + quantile + `], "options": {"reduceOptions": {"calcs": ["lastNotNull"]}}}`, ""},
		{"mean over a counter panel", `{"title": "rate", "targets": [{"expr": "sum(rate(tandem_requests_total[5m]))"}], "options": {"reduceOptions": {"calcs": ["mean"]}}}`, ""},
		{"stat mean of a quantile", `{"title": "p95", "targets": [` + quantile + `], "options": {"reduceOptions": {"calcs": ["mean"]}}}`, "reducer mean"},
		{"legend mean of a quantile", `{"title": "p95", "targets": [` + quantile + `], "options": {"legend": {"calcs": ["last", "mean"]}}}`, "legend calculation mean"},
		{"reduce transformation", `{"title": "p95", "targets": [` + quantile + `], "transformations": [{"id": "reduce", "options": {"reducers": ["mean"]}}]}`, "transformation reduce"},
		{"row mean of quantiles", `{"title": "p95", "targets": [` + quantile + `], "transformations": [{"id": "calculateField", "options": {"mode": "reduceRow", "reduce": {"reducer": "mean"}}}]}`, "transformation calculateField"},
		{"not JSON", `{`, "panel JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPanel([]byte(tc.model))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("CheckPanel = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Errorf("CheckPanel = nil, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("CheckPanel = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
