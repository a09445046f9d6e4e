package dashboards

import (
	"fmt"
	"testing"
)

func TestExpandVariables(t *testing.T) {
	vars := map[string][]string{
		"class":           {"fresh", "repeated_prefix"},
		"window":          {"5m"},
		"__rate_interval": {"1m"},
	}
	for _, tc := range []struct {
		name, expr string
		vars       map[string][]string
		want       string
	}{
		{"multi-value class", `x{class=~"$class"}[$window]`, vars, `x{class=~"(fresh|repeated_prefix)"}[5m]`},
		{"braces and regex format", `x{class=~"${class:regex}"}[${window}]`, vars, `x{class=~"(fresh|repeated_prefix)"}[5m]`},
		{"pipe and csv formats", `${class:pipe} ${class:csv}`, vars, `fresh|repeated_prefix fresh,repeated_prefix`},
		{"old bracket syntax", `x{class=~"[[class]]"}`, vars, `x{class=~"(fresh|repeated_prefix)"}`},
		{"rate interval", `rate(x[$__rate_interval])`, vars, `rate(x[1m])`},
		{"single class", `x{class=~"$class"}`, map[string][]string{"class": {"fresh"}}, `x{class=~"fresh"}`},
		{"class with regex characters", `x{class=~"$class"}`, map[string][]string{"class": {"a.b", "c|d"}}, `x{class=~"(a\\.b|c\\|d)"}`},
		{"unknown variable kept", `rate(x[$interval])`, vars, `rate(x[$interval])`},
		{"prefix of a longer name", `$windowed`, vars, `$windowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExpandVariables(tc.expr, tc.vars); got != tc.want {
				t.Errorf("ExpandVariables(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

func ExampleExpandVariables() {
	expr := `histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds{class=~"$class"}[$window])))`
	fmt.Println(ExpandVariables(expr, map[string][]string{
		"class":  {"fresh", "repeated_prefix"},
		"window": {"5m"},
	}))
	// Output:
	// histogram_quantile(0.95, sum by (config, class) (rate(tandem_time_to_first_token_seconds{class=~"(fresh|repeated_prefix)"}[5m])))
}
