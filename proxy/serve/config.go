package serve

//go:generate go run gen_readme.go ../../README.md

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kestrelops/tandem/proxy"
)

// Config is the configuration of tandem serve, read from TANDEM_* variables:
// its listeners, record file and shutdown, and the proxy's settings. Each
// field's doc tag is the text of the README's configuration table; a before
// tag lists the variable there ahead of the named proxy variable.
type Config struct {
	ListenAddr  string `env:"LISTEN_ADDR, default=:8080" doc:"Proxy listener (client traffic)."`
	MetricsAddr string `env:"METRICS_ADDR, default=:9464" doc:"Metrics, status page and health listener."`

	proxy.Config

	RecordPath     string `env:"RECORD_PATH" before:"PREFIX_CHUNK_BYTES" doc:"When set, one JSON line per measured request is appended here (no prompt text)."`
	RecordMaxBytes int64  `env:"RECORD_MAX_BYTES, default=104857600" before:"PREFIX_CHUNK_BYTES" doc:"Size at which the record file is rotated."`
	RecordMaxFiles int    `env:"RECORD_MAX_FILES, default=5" before:"PREFIX_CHUNK_BYTES" doc:"Rotated record files kept besides the current one."`

	IdleTimeout   time.Duration `env:"IDLE_TIMEOUT, default=75s" before:"BODY_READ_TIMEOUT" doc:"How long an idle client keep-alive connection is kept (nginx's keepalive_timeout)."`
	ShutdownGrace time.Duration `env:"SHUTDOWN_GRACE, default=30s" doc:"On SIGTERM, how long in-flight production requests may take to finish; streams and upgraded connections still open then are cut."`
}

// LoadConfig reads the configuration from l (os environment in production)
// and validates it, once for Run and the proxy. Errors name the offending
// variable.
func LoadConfig(ctx context.Context, l envconfig.Lookuper) (Config, error) {
	var c Config
	if err := proxy.ReadVariables(ctx, l, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks every setting, the proxy's included, and names the first
// invalid variable.
func (c Config) Validate() error {
	for _, a := range []struct{ name, value string }{{"LISTEN_ADDR", c.ListenAddr}, {"METRICS_ADDR", c.MetricsAddr}} {
		if _, _, err := net.SplitHostPort(a.value); err != nil {
			return proxy.Invalid(a.name, "must be host:port or :port, got %q", a.value)
		}
	}
	for _, err := range []error{
		c.Config.Validate(),
		proxy.CheckRange("RECORD_MAX_BYTES", c.RecordMaxBytes, 1<<10, 1<<40),
		proxy.CheckRange("RECORD_MAX_FILES", c.RecordMaxFiles, 0, 1000),
		proxy.CheckRange("IDLE_TIMEOUT", c.IdleTimeout, time.Second, 24*time.Hour),
		proxy.CheckRange("SHUTDOWN_GRACE", c.ShutdownGrace, 0, time.Hour),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// ConfigVars lists every variable of Config in the order of the README's
// table and --help.
func ConfigVars() []proxy.Variable { return proxy.Variables(reflect.TypeFor[Config]()) }

// ConfigTable renders ConfigVars as a Markdown table.
func ConfigTable() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, v := range ConfigVars() {
		def := v.Default
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, v.Doc)
	}
	return b.String()
}
