package proxy

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/testupstream"
)

// extremes are values at and beyond the edges of each setting's type.
var extremes = map[reflect.Kind][]string{
	reflect.Int:     {"0", "-1", "1", "2147483647", "-2147483648", "9223372036854775807", "-9223372036854775808", "99999999999999999999"},
	reflect.Int64:   {"0", "-1", "1", "2147483647", "9223372036854775807", "-9223372036854775808", "99999999999999999999"},
	reflect.Float64: {"0", "-0", "1", "-1", "NaN", "Inf", "-Inf", "1e308", "4.9e-324", "1e309"},
	reflect.String:  {"", " ", "\x00", "a\nb", strings.Repeat("x", 70000), "http://h:1", "\xff\xfe"},
	reflect.Slice:   {"", ",", strings.Repeat("a,", 100), "a,a"},
}

var durationExtremes = []string{"0", "-1ns", "1ns", "1ms", "2562047h47m16.854775807s", "2562048h", "-2562047h", "99999999999h", "1e3s"}

// TestEverySettingAtItsTypesExtremes sets each variable, one at a time, to
// the extremes of its type. Each value must either be refused with one line
// naming the variable, or be accepted and then honoured: the proxy builds,
// serves a request to production and shuts down.
func TestEverySettingAtItsTypesExtremes(t *testing.T) {
	prod, a, b := testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{})
	defer prod.Close()
	defer a.Close()
	defer b.Close()
	base := map[string]string{"TANDEM_PRIMARY_URL": prod.URL, "TANDEM_A_URL": a.URL, "TANDEM_B_URL": b.URL, "TANDEM_SAMPLE_RATE": "1"}
	typ := reflect.TypeFor[Config]()
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		variable := EnvPrefix + name
		values := extremes[f.Type.Kind()]
		if f.Type == reflect.TypeFor[time.Duration]() {
			values = durationExtremes
		}
		if len(values) == 0 {
			t.Fatalf("%s: no extremes for %s", variable, f.Type)
		}
		for _, v := range values {
			env := map[string]string{}
			for k, bv := range base {
				env[k] = bv
			}
			env[variable] = v
			cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(env))
			if err != nil {
				msg := err.Error()
				if !strings.HasPrefix(msg, "invalid "+EnvPrefix) || strings.Contains(msg, "\n") {
					t.Errorf("%s=%.20q: error is not one line naming a variable: %.200s", variable, v, msg)
				}
				continue
			}
			if strings.HasSuffix(name, "_ADDR") || strings.HasSuffix(name, "_URL") {
				continue // where to listen and where upstreams are: only validated here
			}
			serveOnce(t, cfg, variable+"="+v)
		}
	}
}

// serveOnce builds the proxy from cfg and sends one chat request through it.
func serveOnce(t *testing.T, cfg Config, what string) {
	t.Helper()
	m := exporter.New(prometheus.NewRegistry(), cfg.Classes(), nil, "test", "test")
	s, err := New(cfg, m, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Errorf("%.60s: accepted but builds no proxy: %v", what, err)
		return
	}
	front := httptest.NewServer(s)
	resp, body := post(t, front.URL, chatBody, nil)
	front.Close()
	done := make(chan struct{})
	go func() {
		s.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%.60s: shutdown hung", what)
	}
	if resp.StatusCode != 200 || string(body) != testupstream.StreamBody(3) {
		t.Errorf("%.60s: accepted but production answered %d %.60q", what, resp.StatusCode, body)
	}
}
