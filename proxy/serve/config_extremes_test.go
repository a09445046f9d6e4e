package serve

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/proxy"
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

// TestEverySettingAtItsTypesExtremes sets each variable of tandem serve, one
// at a time, to the extremes of its type. Each value must either be refused
// with one line naming the variable, or be accepted and then honoured: tandem
// serves a request to production and shuts down.
func TestEverySettingAtItsTypesExtremes(t *testing.T) {
	prod, a, b := testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{}), testupstream.New(testupstream.Script{})
	defer prod.Close()
	defer a.Close()
	defer b.Close()
	base := map[string]string{
		"TANDEM_LISTEN_ADDR": "127.0.0.1:0", "TANDEM_METRICS_ADDR": "127.0.0.1:0",
		"TANDEM_PRIMARY_URL": prod.URL, "TANDEM_A_URL": a.URL, "TANDEM_B_URL": b.URL, "TANDEM_SAMPLE_RATE": "1",
		"TANDEM_RECORD_PATH": filepath.Join(t.TempDir(), "records.jsonl"),
	}
	for _, f := range settings(reflect.TypeFor[Config]()) {
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		variable := proxy.EnvPrefix + name
		values := extremes[f.Type.Kind()]
		if f.Type == reflect.TypeFor[time.Duration]() {
			values = durationExtremes
		}
		if len(values) == 0 {
			t.Fatalf("%s: no extremes for %s", variable, f.Type)
		}
		for _, v := range values {
			env := maps.Clone(base)
			env[variable] = v
			cfg, err := LoadConfig(context.Background(), envconfig.MapLookuper(env))
			if err != nil {
				msg := err.Error()
				if !strings.HasPrefix(msg, "invalid "+proxy.EnvPrefix) || strings.Contains(msg, "\n") {
					t.Errorf("%s=%.20q: error is not one line naming a variable: %.200s", variable, v, msg)
				}
				continue
			}
			if strings.HasSuffix(name, "_ADDR") || strings.HasSuffix(name, "_URL") || strings.HasSuffix(name, "_PATH") {
				continue // where to listen, where upstreams are and where to write: only validated here
			}
			serveOnce(t, cfg, variable+"="+v)
		}
	}
}

// settings lists the fields of t that are variables, those of embedded
// structs included.
func settings(t reflect.Type) []reflect.StructField {
	var fields []reflect.StructField
	for f := range t.Fields() {
		if f.Anonymous {
			fields = append(fields, settings(f.Type)...)
		} else {
			fields = append(fields, f)
		}
	}
	return fields
}

// serveOnce runs tandem with cfg, sends one chat request through it and
// stops it.
func serveOnce(t *testing.T, cfg Config, what string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Options{Version: "test", Log: slog.New(slog.DiscardHandler),
			Listening: func(proxyAddr, _ string) { listening <- proxyAddr }})
	}()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Errorf("%.60s: accepted but tandem does not start: %v", what, err)
		return
	}
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%.60s: shutdown hung", what)
	}
	if err != nil || resp.StatusCode != 200 || string(body) != testupstream.StreamBody(3) {
		t.Errorf("%.60s: accepted but production answered %v %.60q", what, err, body)
	}
}
