// Package e2e runs the real parts end-to-end tests need: a Prometheus server
// (Debian's prometheus package) on a loopback port, and the tandem binary.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus is a running Prometheus server.
type Prometheus struct {
	URL string
	API v1.API
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartPrometheus starts Prometheus with native histograms on, scraping
// target as job tandem every second and evaluating rulesFile (when not
// empty) every second. It fails the test when the prometheus binary is
// missing: .ci/run installs it.
func StartPrometheus(t testing.TB, target, rulesFile string) *Prometheus {
	t.Helper()
	return StartPrometheusConfig(t, PrometheusConfig{
		Scrapes:   []Scrape{{Job: "tandem", Targets: []string{target}}},
		RulesFile: rulesFile,
	})
}

// Scrape is one scrape job: its targets, with extra target labels.
type Scrape struct {
	Job     string
	Targets []string
	Labels  map[string]string
}

// PrometheusConfig is what StartPrometheusConfig's Prometheus scrapes,
// evaluates and alerts to.
type PrometheusConfig struct {
	Scrapes []Scrape
	// RulesFile, when not empty, is evaluated every second.
	RulesFile string
	// Alertmanager, when not empty, is the host:port alerts are sent to.
	Alertmanager string
}

// StartPrometheusConfig starts Prometheus with native histograms on,
// scraping every second as c says.
func StartPrometheusConfig(t testing.TB, c PrometheusConfig) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed; .ci/run installs it (apt-get install prometheus)")
	}
	dir := t.TempDir()
	var config strings.Builder
	config.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	if c.RulesFile != "" {
		fmt.Fprintf(&config, "rule_files: [%q]\n", c.RulesFile)
	}
	if c.Alertmanager != "" {
		fmt.Fprintf(&config, "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", c.Alertmanager)
	}
	config.WriteString("scrape_configs:\n")
	for _, s := range c.Scrapes {
		type static struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels,omitempty"`
		}
		b, err := json.Marshal(struct {
			Job    string   `json:"job_name"`
			Static []static `json:"static_configs"`
		}{s.Job, []static{{s.Targets, s.Labels}}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&config, "  - %s\n", b) // JSON is YAML
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	runServer(t, dir, "prometheus", bin,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--enable-feature=native-histograms",
		"--log.level=warn")
	url := "http://" + addr
	WaitHTTP(t, url+"/-/ready", 30*time.Second)
	client, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		t.Fatal(err)
	}
	return &Prometheus{URL: url, API: v1.NewAPI(client)}
}

// WaitHTTP waits until url answers 200.
func WaitHTTP(t testing.TB, url string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %s (last error: %v)", url, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Query evaluates expr at ts and fails the test on an error.
func (p *Prometheus) Query(t testing.TB, expr string, ts time.Time) model.Value {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, warnings, _, err := p.API.Query(ctx, expr, ts)
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if len(warnings) > 0 {
		t.Logf("query %s: warnings %v", expr, warnings)
	}
	return v
}

// Vector evaluates expr and returns its samples keyed by the values of the
// given labels joined with "/".
func (p *Prometheus) Vector(t testing.TB, expr string, ts time.Time, labels ...model.LabelName) map[string]*model.Sample {
	t.Helper()
	vec, ok := p.Query(t, expr, ts).(model.Vector)
	if !ok {
		t.Fatalf("query %s did not return a vector", expr)
	}
	out := map[string]*model.Sample{}
	for _, s := range vec {
		var key []string
		for _, l := range labels {
			key = append(key, string(s.Metric[l]))
		}
		out[strings.Join(key, "/")] = s
	}
	return out
}

// BuildTandem builds the tandem binary into dir and returns its path.
func BuildTandem(dir string) (string, error) {
	bin := filepath.Join(dir, "tandem")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/kestrelops/tandem/cmd/tandem").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// runServer starts bin with args, its output in dir/name.log, and stops it
// when the test ends, showing the log if the test failed.
func runServer(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
}
