package serve

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy"
)

// FuzzLoadConfig feeds arbitrary values to the variables whose parsing and
// validation interact. LoadConfig must never panic; an error must name a
// TANDEM_ variable and never echo an API key; an accepted config must
// validate, keep its limits and build a proxy.
func FuzzLoadConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, primary, a, b, sampleRate, sampleBy, shadowTimeout, maxInFlight, classHeader, extraClasses, listen, repeatMinFraction string) {
		const key = "sk-fuzz-secret-key"
		env := map[string]string{"TANDEM_A_API_KEY": key, "TANDEM_B_API_KEY": key}
		for name, v := range map[string]string{
			"PRIMARY_URL": primary, "A_URL": a, "B_URL": b,
			"SAMPLE_RATE": sampleRate, "SAMPLE_BY": sampleBy,
			"SHADOW_TIMEOUT": shadowTimeout, "SHADOW_MAX_IN_FLIGHT": maxInFlight,
			"CLASS_HEADER": classHeader, "EXTRA_CLASSES": extraClasses,
			"LISTEN_ADDR": listen, "REPEAT_MIN_FRACTION": repeatMinFraction,
		} {
			if v != "" {
				env[proxy.EnvPrefix+name] = v
			}
		}
		cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(env))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid "+proxy.EnvPrefix) {
				t.Fatalf("error does not name a variable: %v", err)
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error echoes the API key: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("LoadConfig accepted a config that does not validate: %v", err)
		}
		if !(cfg.SampleRate >= 0 && cfg.SampleRate <= 1) || !(cfg.RepeatMinFraction > 0 && cfg.RepeatMinFraction <= 1) ||
			cfg.ShadowMaxInFlight < 1 || cfg.ShadowTimeout <= 0 ||
			len(cfg.Classes()) > len(exporter.BuiltinClasses)+proxy.MaxExtraClasses {
			t.Fatalf("accepted config out of its limits: %+v", cfg)
		}
		if s := fmt.Sprintf("%+v %#v", cfg, cfg); strings.Contains(s, key) {
			t.Fatalf("config prints the API key: %s", s)
		}
		m := exporter.New(prometheus.NewRegistry(), cfg.Classes(), nil, "fuzz", "fuzz")
		s, err := proxy.New(cfg.Config, m, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("accepted config builds no proxy: %v", err)
		}
		s.Shutdown()
	})
}
