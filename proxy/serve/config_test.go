package serve

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"
)

func load(env map[string]string) (Config, error) {
	return LoadConfig(context.Background(), envconfig.MapLookuper(env))
}

func TestConfigDefaults(t *testing.T) {
	c, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://vllm:8000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr != ":8080" || c.MetricsAddr != ":9464" || c.RecordPath != "" || c.RecordMaxBytes != 100<<20 || c.RecordMaxFiles != 5 ||
		c.IdleTimeout != 75*time.Second || c.ShutdownGrace != 30*time.Second {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if c.PrimaryURL != "http://vllm:8000" || c.SampleBy != "conversation" || c.BodyReadTimeout != 60*time.Second {
		t.Fatalf("the proxy's settings are not read in place: %+v", c.Config)
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"TANDEM_LISTEN_ADDR", "8080", `invalid TANDEM_LISTEN_ADDR: must be host:port or :port, got "8080"`},
		{"TANDEM_METRICS_ADDR", "localhost", `invalid TANDEM_METRICS_ADDR: must be host:port or :port, got "localhost"`},
		{"TANDEM_RECORD_MAX_BYTES", "10", "invalid TANDEM_RECORD_MAX_BYTES: must be between 1024 and 1099511627776, got 10"},
		{"TANDEM_RECORD_MAX_FILES", "2147483647", "invalid TANDEM_RECORD_MAX_FILES: must be between 0 and 1000, got 2147483647"},
		{"TANDEM_IDLE_TIMEOUT", "0s", "invalid TANDEM_IDLE_TIMEOUT: must be between 1s and 24h0m0s, got 0s"},
		{"TANDEM_SHUTDOWN_GRACE", "-1s", "invalid TANDEM_SHUTDOWN_GRACE: must be between 0s and 1h0m0s, got -1s"},
		{"TANDEM_SAMPLE_RATE", "1.5", "invalid TANDEM_SAMPLE_RATE: must be between 0 and 1, got 1.5"},
		{"TANDEM_BODY_READ_TIMEOUT", "2h", "invalid TANDEM_BODY_READ_TIMEOUT: must be between 1s and 1h0m0s, got 2h0m0s"},
	} {
		_, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://prod:8000", tc.name: tc.value})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s=%s:\n got %v\nwant %s", tc.name, tc.value, err, tc.want)
		}
	}
}

func TestConfigUnparsableValueNamesVariable(t *testing.T) {
	for _, name := range []string{"TANDEM_SHUTDOWN_GRACE", "TANDEM_RECORD_MAX_FILES", "TANDEM_SAMPLE_RATE", "TANDEM_SHADOW_TIMEOUT"} {
		_, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://p", name: "not-a-value"})
		if err == nil || !strings.HasPrefix(err.Error(), "invalid "+name+": ") {
			t.Errorf("%s=not-a-value: error %v does not name the variable", name, err)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c, err := load(map[string]string{"TANDEM_PRIMARY_URL": "http://p", "TANDEM_A_URL": "http://a", "TANDEM_B_URL": "http://b",
		"TANDEM_A_API_KEY": "sk-aaaa-secret", "TANDEM_B_API_KEY": "sk-bbbb-secret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, c); strings.Contains(out, "-secret") {
			t.Errorf("%s of Config prints a secret: %s", format, out)
		}
	}
}

// TestConfigVarsListEverySetting: --help and the README list each variable
// tandem serve reads once, the proxy's included.
func TestConfigVarsListEverySetting(t *testing.T) {
	vars := ConfigVars()
	seen := map[string]bool{}
	for _, v := range vars {
		if seen[v.Name] || v.Doc == "" {
			t.Errorf("%s listed twice or without a doc tag", v.Name)
		}
		seen[v.Name] = true
	}
	if want := len(settings(reflect.TypeFor[Config]())); len(vars) != want {
		t.Errorf("ConfigVars lists %d variables, Config has %d", len(vars), want)
	}
}

// TestREADMEConfigTable keeps the README's table in step with Config; go
// generate rewrites it.
func TestREADMEConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), ConfigTable()) {
		t.Fatal("README.md's configuration table is out of date; regenerate it with go generate ./...")
	}
}
