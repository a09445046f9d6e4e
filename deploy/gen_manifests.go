//go:build ignore

// gen_manifests writes the manifests of deploy/kubernetes that are derived
// from code: the PrometheusRule holding the generated rules and the ConfigMap
// holding the dashboards. go generate runs it in deploy/.
package main

import (
	"fmt"
	"os"

	"github.com/kestrelops/tandem/dashboards"
	"github.com/kestrelops/tandem/deploy"
	"github.com/kestrelops/tandem/deploy/rules"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen_manifests:", err)
		os.Exit(1)
	}
}

func run() error {
	ruleFile, err := rules.Generate(rules.DefaultOptions())
	if err != nil {
		return err
	}
	rule, err := deploy.PrometheusRule(ruleFile)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tandem-dashboards-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := dashboards.Write(dir); err != nil {
		return err
	}
	configMap, err := deploy.DashboardsConfigMap(os.DirFS(dir))
	if err != nil {
		return err
	}
	if err := os.WriteFile("kubernetes/prometheusrule.yaml", rule, 0o644); err != nil {
		return err
	}
	return os.WriteFile("kubernetes/dashboards-configmap.yaml", configMap, 0o644)
}
