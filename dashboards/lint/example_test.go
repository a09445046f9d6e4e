package lint_test

import (
	"fmt"

	"github.com/kestrelops/tandem/dashboards/lint"
)

func ExampleCheck() {
	p95 := `histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds[5m])))`
	fmt.Println(lint.Check(p95, false))
	fmt.Println(lint.Check(`avg by (config) (`+p95+`)`, false))
	// Output:
	// <nil>
	// avg is applied to a histogram_quantile result; a quantile of merged requests comes from the merged histogram, never from combining quantiles
}
