package rules_test

import (
	"testing"

	"github.com/kestrelops/tandem/dashboards/lint"
	"github.com/kestrelops/tandem/deploy/rules"
)

func TestExpressionsPassLint(t *testing.T) {
	for _, r := range rules.Expressions(rules.DefaultOptions()) {
		if err := lint.Check(r.Expr, r.Mixed); err != nil {
			t.Errorf("%s: %v", r.Name(), err)
		}
	}
}

func TestMixedDeclarationIsNeeded(t *testing.T) {
	for _, r := range rules.Expressions(rules.DefaultOptions()) {
		if r.Record == rules.TTFTMixedP95 {
			if lint.Check(r.Expr, false) == nil {
				t.Errorf("%s passes lint without its mixed declaration", r.Record)
			}
			return
		}
	}
	t.Fatalf("no rule records %s", rules.TTFTMixedP95)
}
