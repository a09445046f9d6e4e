package deploy_test

import (
	"context"
	"path"
	"strings"
	"testing"

	"github.com/sethvargo/go-envconfig"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kestrelops/tandem/proxy/serve"
)

// TestDeploymentKeepsRecords: the ConfigMap turns records on and the
// Deployment gives them a writable volume, under the read-only root, large
// enough for every rotated file.
func TestDeploymentKeepsRecords(t *testing.T) {
	m := loadManifests(t)
	pod := m.deployment.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			for k, v := range m.configMaps[from.ConfigMapRef.Name].Data {
				env[k] = v
			}
		}
	}
	env["TANDEM_PRIMARY_URL"] = "http://production:8000"
	cfg, err := serve.LoadConfig(context.Background(), envconfig.MapLookuper(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RecordPath == "" {
		t.Fatal("the ConfigMap sets no TANDEM_RECORD_PATH")
	}
	volume := ""
	for _, vm := range c.VolumeMounts {
		if strings.HasPrefix(path.Dir(cfg.RecordPath)+"/", strings.TrimSuffix(vm.MountPath, "/")+"/") && !vm.ReadOnly {
			volume = vm.Name
		}
	}
	if volume == "" {
		t.Fatalf("TANDEM_RECORD_PATH %s is on no writable volume mount (%+v); the root file system is read-only", cfg.RecordPath, c.VolumeMounts)
	}
	for _, v := range pod.Volumes {
		if v.Name != volume {
			continue
		}
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			t.Fatalf("records volume %+v: want an emptyDir with a size limit", v.VolumeSource)
		}
		need := resource.NewQuantity(cfg.RecordMaxBytes*int64(cfg.RecordMaxFiles+1), resource.BinarySI)
		if v.EmptyDir.SizeLimit.Cmp(*need) < 0 {
			t.Errorf("records volume holds %s, the rotated files need %s", v.EmptyDir.SizeLimit, need)
		}
		return
	}
	t.Errorf("no volume %s", volume)
}
