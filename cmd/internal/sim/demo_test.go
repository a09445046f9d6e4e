package sim_test

import (
	"flag"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/cmd/internal/sim"
	"github.com/kestrelops/tandem/cmd/internal/sim/inproc"
	"github.com/kestrelops/tandem/exporter"
)

// demoLoad is the demo's load: the loadgen defaults.
func demoLoad(t *testing.T, d time.Duration, seed int64) loadgen.Config {
	var c loadgen.Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	c.Target = "http://sim"
	c.Duration = d
	c.Seed = seed
	return c
}

func runDemo(t *testing.T, profile string, c loadgen.Config) *loadgen.Summary {
	t.Helper()
	var summary *loadgen.Summary
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(sim.Profiles()[profile], 1)
		defer s.Close()
		c.Client = inproc.Client(s)
		var err error
		summary, _, err = loadgen.Run(t.Context(), c, nil)
		if err != nil {
			t.Fatal(err)
		}
	})
	if testing.Verbose() {
		t.Logf("profile %s:", profile)
		summary.WriteText(os.Stderr)
	}
	return summary
}

func class(t *testing.T, s *loadgen.Summary, name string) loadgen.ClassSummary {
	t.Helper()
	for _, c := range s.Classes {
		if c.Class == name {
			return c
		}
	}
	t.Fatalf("no class %q in %+v", name, s.Classes)
	return loadgen.ClassSummary{}
}

// TestDemoProfiles drives profiles a and b with the same demo trace and
// checks the directions the demo is meant to show.
func TestDemoProfiles(t *testing.T) {
	c := demoLoad(t, 12*time.Second, 1)
	a, b := runDemo(t, "a", c), runDemo(t, "b", c)
	for _, s := range []*loadgen.Summary{a, b} {
		if s.Mixed.Failed != 0 || s.Mixed.Dropped != 0 || s.Mixed.Completed != s.Mixed.Scheduled {
			t.Fatalf("run did not complete cleanly: %+v", s.Mixed)
		}
	}
	fa, fb := class(t, a, exporter.ClassFresh), class(t, b, exporter.ClassFresh)
	ra, rb := class(t, a, exporter.ClassRepeatedPrefix), class(t, b, exporter.ClassRepeatedPrefix)
	if !(fb.TTFTP95 > fa.TTFTP95) {
		t.Errorf("fresh TTFT p95: A %.3fs, B %.3fs; want B worse", fa.TTFTP95, fb.TTFTP95)
	}
	if !(rb.TTFTP95 < ra.TTFTP95) {
		t.Errorf("repeated-prefix TTFT p95: A %.3fs, B %.3fs; want B better", ra.TTFTP95, rb.TTFTP95)
	}
	if !(fb.SpeedP50 > fa.SpeedP50) || !(rb.SpeedP50 > ra.SpeedP50) {
		t.Errorf("output speed p50: fresh A %.1f B %.1f, repeated A %.1f B %.1f tokens/s; want B faster on both",
			fa.SpeedP50, fb.SpeedP50, ra.SpeedP50, rb.SpeedP50)
	}
	for _, cs := range []loadgen.ClassSummary{fa, fb, ra, rb} {
		if cs.TTFTP50 < 0.05 || cs.TTFTP99 > 2 {
			t.Errorf("%s TTFT p50 %.3fs p99 %.3fs outside the demo's range", cs.Class, cs.TTFTP50, cs.TTFTP99)
		}
	}
}
