package deploy_test

import (
	"bytes"
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/sethvargo/go-envconfig"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kestrelops/tandem/deploy"
	"github.com/kestrelops/tandem/deploy/rules"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/promql"
	"github.com/kestrelops/tandem/proxy"
	"github.com/kestrelops/tandem/proxy/serve"
)

const dashboardsDir = "../dashboards/json"

func generatedRules(t *testing.T) []byte {
	t.Helper()
	b, err := rules.Generate(rules.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGeneratedManifestsAreCurrent(t *testing.T) {
	rule, err := deploy.PrometheusRule(generatedRules(t))
	if err != nil {
		t.Fatal(err)
	}
	dashboards, err := deploy.DashboardsConfigMap(os.DirFS(dashboardsDir))
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]byte{
		"kubernetes/prometheusrule.yaml":       rule,
		"kubernetes/dashboards-configmap.yaml": dashboards,
	} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/%s is stale; regenerate it with\n\tgo generate ./...", file)
		}
	}
}

// decodeStrict decodes one manifest as the API server would: field names
// are case-sensitive, unknown and duplicate fields are errors.
func decodeStrict(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	strictErrs, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, e := range strictErrs {
		t.Errorf("%s: %v", file, e)
	}
}

type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name   string `json:"name"`
		NewTag string `json:"newTag"`
	} `json:"images"`
}

// manifests are the objects deploy/kubernetes/kustomization.yaml lists,
// decoded strictly into their API types.
type manifests struct {
	deployment     *appsv1.Deployment
	services       map[string]*corev1.Service
	configMaps     map[string]*corev1.ConfigMap
	secrets        map[string]*corev1.Secret
	pdb            *policyv1.PodDisruptionBudget
	serviceMonitor *monitoringv1.ServiceMonitor
	prometheusRule *monitoringv1.PrometheusRule
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	var k kustomization
	decodeStrict(t, "kubernetes/kustomization.yaml", &k)
	m := manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for _, res := range k.Resources {
		file := filepath.Join("kubernetes", res)
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", res, err)
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kind := meta.APIVersion + " " + meta.Kind
		switch kind {
		case "apps/v1 Deployment":
			m.deployment = &appsv1.Deployment{}
			decodeStrict(t, file, m.deployment)
		case "v1 Service":
			s := &corev1.Service{}
			decodeStrict(t, file, s)
			m.services[s.Name] = s
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			decodeStrict(t, file, c)
			m.configMaps[c.Name] = c
		case "v1 Secret":
			s := &corev1.Secret{}
			decodeStrict(t, file, s)
			m.secrets[s.Name] = s
		case "policy/v1 PodDisruptionBudget":
			m.pdb = &policyv1.PodDisruptionBudget{}
			decodeStrict(t, file, m.pdb)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.serviceMonitor = &monitoringv1.ServiceMonitor{}
			decodeStrict(t, file, m.serviceMonitor)
		case "monitoring.coreos.com/v1 PrometheusRule":
			m.prometheusRule = &monitoringv1.PrometheusRule{}
			decodeStrict(t, file, m.prometheusRule)
		default:
			t.Fatalf("%s: unexpected %s", file, kind)
		}
	}
	if m.deployment == nil || m.pdb == nil || m.serviceMonitor == nil || m.prometheusRule == nil {
		t.Fatalf("kustomization.yaml lacks a Deployment, PodDisruptionBudget, ServiceMonitor or PrometheusRule")
	}
	return m
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	var k kustomization
	decodeStrict(t, "kubernetes/kustomization.yaml", &k)
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			t.Errorf("kustomization.yaml does not list %s", name)
		}
	}
	loadManifests(t)
}

// defaults is tandem serve's configuration with nothing but the production URL set.
func defaults(t *testing.T) serve.Config {
	t.Helper()
	cfg, err := serve.LoadConfig(context.Background(), envconfig.MapLookuper(map[string]string{
		proxy.EnvPrefix + "PRIMARY_URL": "http://production:8000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func TestDeployment(t *testing.T) {
	m := loadManifests(t)
	cfg := defaults(t)
	d := m.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v, want at least 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if got, want := containerPort(c, "proxy"), port(t, cfg.ListenAddr); got != want {
		t.Errorf("proxy container port %d, tandem listens on %d", got, want)
	}
	if got, want := containerPort(c, "metrics"), port(t, cfg.MetricsAddr); got != want {
		t.Errorf("metrics container port %d, tandem serves metrics on %d", got, want)
	}
	for name, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/-/ready", "liveness": "/-/healthy"}[name]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %+v, want GET %s on the metrics port", name, probe, want)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v lack cpu and memory requests or a memory limit", c.Resources)
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod security context %+v does not run as a non-root user", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v: want read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	// The preStop delay keeps the listener open until endpoints have
	// dropped the pod, so no client sees "connection refused" in a rollout.
	var preStop int64
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 5 {
		t.Errorf("lifecycle %+v: want a preStop sleep of at least 5s", c.Lifecycle)
	} else {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if grace := pod.TerminationGracePeriodSeconds; grace == nil || float64(*grace-preStop) <= cfg.ShutdownGrace.Seconds() {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than the preStop delay (%ds) plus the default TANDEM_SHUTDOWN_GRACE %s", grace, preStop, cfg.ShutdownGrace)
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil && m.configMaps[from.ConfigMapRef.Name] == nil:
			t.Errorf("envFrom names ConfigMap %s, which is not in the kustomization", from.ConfigMapRef.Name)
		case from.SecretRef != nil && m.secrets[from.SecretRef.Name] == nil:
			t.Errorf("envFrom names Secret %s, which is not in the kustomization", from.SecretRef.Name)
		}
	}
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if !selects(m.pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || m.pdb.Spec.MinAvailable == nil {
		t.Errorf("PodDisruptionBudget %+v does not keep tandem pods available", m.pdb.Spec)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestEnvironmentLoads feeds the ConfigMap and Secret to tandem serve's own
// configuration loader.
func TestEnvironmentLoads(t *testing.T) {
	m := loadManifests(t)
	known := map[string]bool{}
	for _, v := range serve.ConfigVars() {
		known[v.Name] = true
	}
	env := map[string]string{}
	for _, from := range m.deployment.Spec.Template.Spec.Containers[0].EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			data = m.configMaps[from.ConfigMapRef.Name].Data
		case from.SecretRef != nil:
			data = m.secrets[from.SecretRef.Name].StringData
		}
		for k, v := range data {
			if !known[k] {
				t.Errorf("%s is not a tandem serve variable", k)
			}
			env[k] = v
		}
	}
	cfg, err := serve.LoadConfig(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatalf("tandem serve rejects the Kubernetes configuration: %v", err)
	}
	if !cfg.Mirroring() || cfg.AAPIKey == "" || cfg.BAPIKey == "" || cfg.SampleBy != "conversation" {
		t.Errorf("configuration %+v: want both arms with API keys, sampled by conversation", cfg)
	}
}

func TestServicesAndServiceMonitor(t *testing.T) {
	m := loadManifests(t)
	cfg := defaults(t)
	pods := m.deployment.Spec.Template.Labels
	c := m.deployment.Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for name, s := range m.services {
		if !selects(s.Spec.Selector, pods) {
			t.Errorf("service %s selects %v, not tandem's pods %v", name, s.Spec.Selector, pods)
		}
		for _, p := range s.Spec.Ports {
			if containerPort(c, p.TargetPort.String()) == 0 {
				t.Errorf("service %s targets port %s, which the container does not name", name, p.TargetPort.String())
			}
			ports[p.Name] = p.Port
		}
	}
	if ports["proxy"] != port(t, cfg.ListenAddr) || ports["metrics"] != port(t, cfg.MetricsAddr) {
		t.Errorf("service ports %v, want proxy %s and metrics %s", ports, cfg.ListenAddr, cfg.MetricsAddr)
	}
	sm := m.serviceMonitor.Spec
	var monitored []string
	for name, s := range m.services {
		if selects(sm.Selector.MatchLabels, s.Labels) {
			monitored = append(monitored, name)
			for _, e := range sm.Endpoints {
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port && p.Port == port(t, cfg.MetricsAddr) }) {
					t.Errorf("ServiceMonitor endpoint port %q is not the metrics port of service %s", e.Port, name)
				}
			}
		}
	}
	if len(monitored) != 1 || len(sm.Endpoints) == 0 {
		t.Errorf("ServiceMonitor selects services %v with %d endpoints, want exactly the metrics service", monitored, len(sm.Endpoints))
	}
	if sm.ScrapeNativeHistograms == nil || !*sm.ScrapeNativeHistograms || len(sm.ScrapeProtocols) == 0 || sm.ScrapeProtocols[0] != monitoringv1.PrometheusProto {
		t.Errorf("ServiceMonitor must scrape native histograms over protobuf first, got %v %v", sm.ScrapeNativeHistograms, sm.ScrapeProtocols)
	}
}

func TestPrometheusRuleHoldsGeneratedRules(t *testing.T) {
	m := loadManifests(t)
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(generatedRules(t), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.prometheusRule.Spec, want) {
		t.Error("prometheusrule.yaml does not hold the generated rules; run go generate ./...")
	}
	var names []string
	for _, g := range m.prometheusRule.Spec.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Record+r.Alert)
		}
	}
	var all []string
	for _, r := range rules.Expressions(rules.DefaultOptions()) {
		all = append(all, r.Name())
	}
	if !slices.Equal(names, all) {
		t.Errorf("PrometheusRule holds %v, want %v", names, all)
	}
}

func TestDashboardsConfigMapHoldsDashboards(t *testing.T) {
	m := loadManifests(t)
	cm := m.configMaps[deploy.DashboardsConfigMapName]
	if cm == nil {
		t.Fatalf("no ConfigMap %s", deploy.DashboardsConfigMapName)
	}
	if cm.Labels[deploy.GrafanaDashboardLabel] != "1" {
		t.Errorf("labels %v lack %s: \"1\" for Grafana's sidecar", cm.Labels, deploy.GrafanaDashboardLabel)
	}
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Base(f)] = string(b)
	}
	if len(cm.Data) != len(want) {
		t.Errorf("ConfigMap holds %d dashboards, dashboards/json has %d", len(cm.Data), len(want))
	}
	for name, body := range want {
		if cm.Data[name] != body {
			t.Errorf("ConfigMap entry %s differs from dashboards/json/%s; run go generate ./...", name, name)
		}
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is required (apt-get install prometheus, or a release tarball): %v", err)
	}
	return path
}

type prometheusConfig struct {
	Global        map[string]any `json:"global"`
	RuleFiles     []string       `json:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		StaticConfigs []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

// TestPrometheusConfigs checks prometheus-2.yml with the installed promtool
// (2.42). It only parses prometheus-3.yml: 2.42 rejects its
// scrape_native_histograms key, which Prometheus 3.8 introduced.
func TestPrometheusConfigs(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "config", "prometheus/prometheus-2.yml").CombinedOutput()
	if err != nil {
		t.Errorf("promtool check config prometheus-2.yml: %v\n%s", err, out)
	}
	metrics := port(t, defaults(t).MetricsAddr)
	for _, file := range []string{"prometheus/prometheus-2.yml", "prometheus/prometheus-3.yml"} {
		var c prometheusConfig
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !slices.Equal(c.RuleFiles, []string{"rules.yml"}) {
			t.Errorf("%s loads %v, want the generated rules.yml", file, c.RuleFiles)
		}
		if len(c.ScrapeConfigs) != 1 || len(c.ScrapeConfigs[0].StaticConfigs) != 1 || len(c.ScrapeConfigs[0].StaticConfigs[0].Targets) != 1 {
			t.Fatalf("%s: want one scrape config with one target", file)
		}
		if got := port(t, c.ScrapeConfigs[0].StaticConfigs[0].Targets[0]); got != metrics {
			t.Errorf("%s scrapes port %d, tandem serves metrics on %d", file, got, metrics)
		}
	}
	var c prometheusConfig
	decodeStrict(t, "prometheus/prometheus-3.yml", &c)
	if c.Global["scrape_native_histograms"] != true {
		t.Errorf("prometheus-3.yml does not set scrape_native_histograms: true")
	}
}

// TestTapOverlayLoads applies the tap overlay's patch to the ConfigMap and
// feeds the result to tandem serve's loader.
func TestTapOverlayLoads(t *testing.T) {
	raw, err := os.ReadFile("kubernetes/tap/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Target struct{ Kind, Name string } `json:"target"`
			Patch  string                      `json:"patch"`
		} `json:"patches"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Resources, []string{".."}) || len(k.Patches) != 1 || k.Patches[0].Target.Kind != "ConfigMap" {
		t.Fatalf("tap overlay %+v: want the base and one ConfigMap patch", k)
	}
	var ops []struct{ Op, Path, Value string }
	if err := yaml.Unmarshal([]byte(k.Patches[0].Patch), &ops); err != nil {
		t.Fatal(err)
	}
	m := loadManifests(t)
	env := maps.Clone(m.configMaps[k.Patches[0].Target.Name].Data)
	for _, op := range ops {
		name := strings.TrimPrefix(op.Path, "/data/")
		switch op.Op {
		case "add", "replace":
			env[name] = op.Value
		case "remove":
			delete(env, name)
		}
	}
	for _, s := range m.secrets {
		maps.Copy(env, s.StringData)
	}
	cfg, err := serve.LoadConfig(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatalf("tandem serve rejects the tap overlay's configuration: %v", err)
	}
	if cfg.Mode != proxy.ModeTap || cfg.PrimaryURL != "" {
		t.Errorf("tap overlay: mode %q, production %q; want tap and no production", cfg.Mode, cfg.PrimaryURL)
	}
}

// TestAlertmanagerConfig: the example routing loads in Alertmanager, pages
// on critical, and inhibits a warning only by the same alert of the same
// experiment and series.
func TestAlertmanagerConfig(t *testing.T) {
	const file = "alertmanager/alertmanager.yml"
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		t.Fatal("amtool is not installed; .ci/run installs it (apt-get install prometheus-alertmanager)")
	}
	if out, err := exec.Command(amtool, "check-config", file).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", file, err, out)
	}
	for _, tc := range []struct{ labels, want string }{
		{"severity=critical alertname=" + rules.AlertTTFTRegression, "pager"},
		{"severity=warning alertname=" + rules.AlertTTFTRegression, "tickets"},
	} {
		out, err := exec.Command(amtool, append([]string{"config", "routes", "test", "--config.file=" + file}, strings.Fields(tc.labels)...)...).Output()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%s routes to %q (%v), want %s", tc.labels, out, err, tc.want)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		InhibitRules []struct {
			Equal []string `json:"equal"`
		} `json:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &config); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"alertname"}, promql.By(exporter.LabelConfig, exporter.LabelClass)...)
	if len(config.InhibitRules) != 1 || !reflect.DeepEqual(config.InhibitRules[0].Equal, want) {
		t.Errorf("inhibit_rules = %+v, want one rule with equal %v", config.InhibitRules, want)
	}
}
