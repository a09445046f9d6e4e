package rules_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kestrelops/tandem/deploy/rules"
)

const committedRules = "../prometheus/rules.yml"

func generate(t *testing.T, o rules.Options) []byte {
	t.Helper()
	b, err := rules.Generate(o)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return b
}

func TestCommittedRulesAreCurrent(t *testing.T) {
	want := generate(t, rules.DefaultOptions())
	got, err := os.ReadFile(committedRules)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/prometheus/rules.yml is stale; regenerate it with\n\tgo generate ./...")
	}
}

func TestGeneratedRulesParse(t *testing.T) {
	groups, errs := rulefmt.Parse(generate(t, rules.DefaultOptions()), false, model.UTF8Validation, parser.NewParser(parser.Options{}), nil)
	for _, err := range errs {
		t.Error(err)
	}
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Record+r.Alert)
		}
	}
	var want []string
	for _, r := range rules.Expressions(rules.DefaultOptions()) {
		want = append(want, r.Name())
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("rule file holds %v, Expressions lists %v", names, want)
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is required (apt-get install prometheus, or a release tarball): %v", err)
	}
	return path
}

func TestPromtoolCheckRules(t *testing.T) {
	fast := rules.DefaultOptions()
	fast.Window = 30 * time.Second
	fast.EvaluationInterval = time.Second
	fast.TTFTRegressionFor = 0
	fast.MinCompleted = 1
	for name, o := range map[string]rules.Options{"default": rules.DefaultOptions(), "fast": fast} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "rules.yml")
			if err := os.WriteFile(file, generate(t, o), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, out)
			}
		})
	}
}

func TestPromtoolRuleTests(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), generate(t, rules.DefaultOptions()), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Glob("testdata/*.test.yml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in testdata: %v", err)
	}
	for _, src := range tests {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(promtool(t), "test", "rules", dst).CombinedOutput()
		if err != nil {
			t.Errorf("promtool test rules %s: %v\n%s", src, err, out)
		}
	}
}
