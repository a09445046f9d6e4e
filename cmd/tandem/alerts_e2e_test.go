package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/e2e"
	"github.com/kestrelops/tandem/deploy/rules"
	"github.com/kestrelops/tandem/exporter"
)

// checkPagedForFreshOnly: the demo's one-class TTFT regression (fresh)
// reaches Alertmanager's webhook receiver with its class, both arms' names
// and a runbook link; repeated_prefix, where B is faster, pages nothing.
func (r *demoRun) checkPagedForFreshOnly(t *testing.T) {
	isFresh := func(n e2e.Notification) bool {
		return n.Labels["alertname"] == rules.AlertTTFTRegression && n.Labels["class"] == exporter.ClassFresh
	}
	pages := r.alerts.WaitPages(15*time.Second, isFresh)
	i := slices.IndexFunc(pages, isFresh)
	if i < 0 {
		t.Fatalf("no %s page for class fresh; pages: %+v", rules.AlertTTFTRegression, pages)
	}
	page := pages[i]
	if s := page.Labels["severity"]; s != rules.SeverityWarning && s != rules.SeverityCritical {
		t.Errorf("severity %q, want warning or critical", s)
	}
	if got, want := page.Annotations["runbook_url"], "README.md#"+strings.ToLower(rules.AlertTTFTRegression); !strings.HasSuffix(got, want) {
		t.Errorf("runbook_url %q does not end in %q", got, want)
	}
	names := r.prom.Vector(t, exporter.MetricConfigInfo, r.end, "config", "name")
	for _, arm := range exporter.Arms {
		found := false
		for key := range names {
			config, name, _ := strings.Cut(key, "/")
			if config == arm && strings.Contains(page.Annotations["arms"], arm+": "+name) {
				found = true
			}
		}
		if !found {
			t.Errorf("arms annotation %q does not name %s (tandem_config_info: %v)", page.Annotations["arms"], arm, names)
		}
	}
	for _, p := range pages {
		if p.Labels["alertname"] == rules.AlertTTFTRegression && p.Labels["class"] != exporter.ClassFresh {
			t.Errorf("paged for class %s: %+v", p.Labels["class"], p)
		}
	}
}

// checkNothingPaged: an A/A run sends nothing to the receiver, after
// Alertmanager's group_wait has passed.
func (r *demoRun) checkNothingPaged(t *testing.T) {
	time.Sleep(3 * time.Second)
	if pages := r.alerts.Pages(); len(pages) > 0 {
		t.Errorf("with identical A and B, Alertmanager sent %d alerts: %+v", len(pages), pages)
	}
}
