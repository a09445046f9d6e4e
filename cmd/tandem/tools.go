//go:build tools

package main

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "github.com/prometheus/client_golang/api/prometheus/v1"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/prometheus/prometheus/model/rulefmt"
	_ "github.com/prometheus/prometheus/promql/parser"
	_ "github.com/sethvargo/go-envconfig"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "k8s.io/api/apps/v1"
	_ "sigs.k8s.io/yaml"
)
