package deploy_test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type composeService struct {
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	ReadOnly    bool              `yaml:"read_only"`
	Tmpfs       []string          `yaml:"tmpfs"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   []string          `yaml:"depends_on"`
}

// decodeYAMLStrict decodes file into v; keys v does not declare are errors.
func decodeYAMLStrict(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// mounts maps each bind mount's target to its source, relative to the
// compose directory.
func mounts(s composeService) map[string]string {
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		m[parts[1]] = parts[0]
	}
	return m
}

// containerPorts lists the container side of each "host:container" port.
func containerPorts(t *testing.T, s composeService) []int32 {
	t.Helper()
	var out []int32
	for _, p := range s.Ports {
		_, container, _ := strings.Cut(p, ":")
		n, err := strconv.Atoi(container)
		if err != nil {
			t.Fatalf("port %q: %v", p, err)
		}
		out = append(out, int32(n))
	}
	return out
}

func TestCompose(t *testing.T) {
	const dir = "compose"
	var c struct {
		Name     string                    `yaml:"name"`
		Services map[string]composeService `yaml:"services"`
	}
	decodeYAMLStrict(t, filepath.Join(dir, "compose.yaml"), &c)
	for name, s := range c.Services {
		for target, source := range mounts(s) {
			if _, err := os.Stat(filepath.Join(dir, source)); err != nil {
				t.Errorf("service %s mounts %s at %s: %v", name, source, target, err)
			}
		}
		for _, dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
	}

	cfg := defaults(t)
	tandem, ok := c.Services["tandem"]
	if !ok || tandem.Build == nil {
		t.Fatal("no tandem service built from source")
	}
	if _, err := os.Stat(filepath.Join(dir, tandem.Build.Context, tandem.Build.Dockerfile)); err != nil {
		t.Errorf("tandem's Dockerfile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tandem.Build.Context, "go.mod")); err != nil {
		t.Errorf("tandem's build context is not the repository root: %v", err)
	}
	if len(tandem.Command) == 0 || tandem.Command[0] != "demo" {
		t.Errorf("tandem runs %v, want the demo subcommand", tandem.Command)
	}
	metrics := port(t, cfg.MetricsAddr)
	ports := containerPorts(t, tandem)
	if !slices.Contains(ports, metrics) || !slices.Contains(ports, port(t, cfg.ListenAddr)) {
		t.Errorf("tandem publishes %v, want the proxy %s and metrics %s ports", ports, cfg.ListenAddr, cfg.MetricsAddr)
	}

	prom := c.Services["prometheus"]
	configFile := ""
	for _, arg := range prom.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			configFile = v
		}
	}
	source, ok := mounts(prom)[configFile]
	if !ok || filepath.Base(source) != "prometheus-3.yml" {
		t.Fatalf("prometheus reads %q, which is not the mounted prometheus-3.yml (mounts %v)", configFile, mounts(prom))
	}
	var pc prometheusConfig
	decodeStrict(t, filepath.Join(dir, source), &pc)
	for _, rf := range pc.RuleFiles {
		inContainer := path.Join(path.Dir(configFile), rf)
		if src, ok := mounts(prom)[inContainer]; !ok || filepath.Base(src) != "rules.yml" {
			t.Errorf("prometheus loads %s, which is not the mounted rules.yml", inContainer)
		}
	}
	if want := "tandem:" + strconv.Itoa(int(metrics)); pc.ScrapeConfigs[0].StaticConfigs[0].Targets[0] != want {
		t.Errorf("prometheus scrapes %s, want %s", pc.ScrapeConfigs[0].StaticConfigs[0].Targets[0], want)
	}
	if !slices.Contains(containerPorts(t, prom), 9090) {
		t.Errorf("prometheus publishes %v, want 9090", prom.Ports)
	}

	grafana := c.Services["grafana"]
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name     string            `yaml:"name"`
			UID      string            `yaml:"uid"`
			Type     string            `yaml:"type"`
			Access   string            `yaml:"access"`
			URL      string            `yaml:"url"`
			Default  bool              `yaml:"isDefault"`
			JSONData map[string]string `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	provisioning, ok := mounts(grafana)["/etc/grafana/provisioning"]
	if !ok {
		t.Fatal("grafana has no provisioning mounted")
	}
	decodeYAMLStrict(t, filepath.Join(dir, provisioning, "datasources", "prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana data sources %+v, want the prometheus service", ds.Datasources)
	}
	var providers struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name            string            `yaml:"name"`
			Folder          string            `yaml:"folder"`
			Type            string            `yaml:"type"`
			DisableDeletion bool              `yaml:"disableDeletion"`
			AllowUIUpdates  bool              `yaml:"allowUiUpdates"`
			Options         map[string]string `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeYAMLStrict(t, filepath.Join(dir, provisioning, "dashboards", "tandem.yaml"), &providers)
	if len(providers.Providers) != 1 {
		t.Fatalf("want one dashboard provider, got %d", len(providers.Providers))
	}
	dashboards, ok := mounts(grafana)[providers.Providers[0].Options["path"]]
	if !ok || filepath.Clean(filepath.Join(dir, dashboards)) != filepath.Clean(dashboardsDir) {
		t.Errorf("grafana's dashboard provider reads %s, where %s is not mounted", providers.Providers[0].Options["path"], dashboardsDir)
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	var build, user, expose string
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "FROM":
			stages = append(stages, fields[1])
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		case "USER":
			user = fields[1]
		case "EXPOSE":
			expose = line
		}
	}
	if len(stages) < 2 {
		t.Errorf("stages %v: want a build stage and a runtime stage", stages)
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %s, want distroless/static or scratch", final)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "./cmd/tandem") {
		t.Errorf("build step %q does not build ./cmd/tandem statically", build)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage runs as %q, want a non-root user", user)
	}
	cfg := defaults(t)
	for _, addr := range []string{cfg.ListenAddr, cfg.MetricsAddr} {
		if !strings.Contains(expose, strconv.Itoa(int(port(t, addr)))) {
			t.Errorf("%q does not expose %s", strings.TrimSpace(expose), addr)
		}
	}
}
