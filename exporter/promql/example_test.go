package promql_test

import (
	"fmt"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
)

func Example() {
	ttft := promql.Selector(exporter.MetricTimeToFirstToken, promql.Arms)
	fmt.Println(promql.HistogramQuantile(0.95, promql.Sum(promql.Rate(ttft, "5m"), promql.ByConfigClass...)))
	fmt.Println(promql.Sum(promql.Increase(exporter.MetricPairs, "1h"), promql.By()...))
	// Output:
	// histogram_quantile(0.95, sum by (job, namespace, experiment, config, class) (rate(tandem_time_to_first_token_seconds{config=~"A|B"}[5m])))
	// sum by (job, namespace, experiment) (increase(tandem_pairs_total[1h]))
}
