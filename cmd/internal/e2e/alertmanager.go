package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Alertmanager is a running Alertmanager (Debian's prometheus-alertmanager)
// whose one receiver is a webhook served by the test.
type Alertmanager struct {
	// Addr is host:port, for Prometheus's alerting configuration.
	Addr string

	mu    sync.Mutex
	pages []Notification
}

// Notification is one alert as the webhook receiver got it (Alertmanager's
// webhook payload, version 4).
type Notification struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// StartAlertmanager starts Alertmanager on loopback, clustering off, routing
// every alert to a webhook receiver with group_wait and group_interval of 1s,
// and a critical alert inhibiting the warning of the same alert and series.
// It fails the test when the binary is missing: .ci/run installs it.
func StartAlertmanager(t testing.TB) *Alertmanager {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatal("prometheus-alertmanager is not installed; .ci/run installs it (apt-get install prometheus-alertmanager)")
	}
	am := &Alertmanager{Addr: FreeAddr(t)}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var payload struct {
			Alerts []Notification `json:"alerts"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&payload); err != nil {
			t.Errorf("webhook: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		am.pages = append(am.pages, payload.Alerts...)
		am.mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	config := fmt.Sprintf(`route:
  receiver: webhook
  group_by: [alertname, severity, job, namespace, experiment, config, class]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: %q
        send_resolved: false
inhibit_rules:
  - source_matchers: [severity="critical"]
    target_matchers: [severity="warning"]
    equal: [alertname, job, namespace, experiment, config, class]
`, hook.URL)
	configFile := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	runServer(t, dir, "alertmanager", bin,
		"--config.file="+configFile,
		"--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+am.Addr,
		"--cluster.listen-address=",
		"--log.level=warn")
	WaitHTTP(t, "http://"+am.Addr+"/-/ready", 30*time.Second)
	return am
}

// Pages returns every alert the webhook receiver has got so far.
func (am *Alertmanager) Pages() []Notification {
	am.mu.Lock()
	defer am.mu.Unlock()
	return append([]Notification(nil), am.pages...)
}

// WaitPages waits up to limit for an alert that match accepts, and returns
// every alert received by then.
func (am *Alertmanager) WaitPages(limit time.Duration, match func(Notification) bool) []Notification {
	deadline := time.Now().Add(limit)
	for {
		pages := am.Pages()
		for _, p := range pages {
			if match(p) {
				return pages
			}
		}
		if time.Now().After(deadline) {
			return pages
		}
		time.Sleep(200 * time.Millisecond)
	}
}
