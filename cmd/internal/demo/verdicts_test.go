package demo

import (
	"flag"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/cmd/internal/loadgen"
	"github.com/kestrelops/tandem/cmd/internal/report"
	"github.com/kestrelops/tandem/cmd/internal/sim"
	"github.com/kestrelops/tandem/cmd/internal/sim/inproc"
	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/verdict"
	"github.com/kestrelops/tandem/proxy/record"
)

// defaultConfig is the demo's configuration with default flags.
func defaultConfig(t *testing.T) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// virtualRecords plays the demo's load for c in virtual time: the load
// generator's trace (loadConfig, so the same schedule, workload and seed as
// tandem demo) is sent at once to simulated engines A and B, built as the
// demo builds them, through in-process clients, and each arm's client-side
// measurement becomes that arm's record of the pair. Production records
// repeat the pairs' classes, as tandem records them with every request
// mirrored.
//
// What this leaves out of the real demo: tandem's proxy between the load
// generator and the engines (its per-request overhead is well under a
// millisecond), real-time scheduling noise, and tandem's classifier: a
// request's class here is the one the load generator intended, which differs
// from tandem's only for the first request of each shared system prompt
// (intended repeated_prefix, seen as fresh because nothing before it shares
// its prefix).
//
// It also returns how long the load and its drain took: from the first
// request to the end of the last response.
func virtualRecords(t *testing.T, c Config) ([]record.Record, time.Duration) {
	t.Helper()
	var recs []record.Record
	var elapsed time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var (
			wg      sync.WaitGroup
			results [2][]loadgen.Result
			errs    [2]error
		)
		for side, profile := range []string{c.AProfile, c.BProfile} {
			engine := sim.New(sim.Profiles()[profile], c.Seed)
			defer engine.Close()
			lc := loadConfig(c, "sim")
			lc.Client = inproc.Client(engine)
			wg.Go(func() { _, results[side], errs[side] = loadgen.Run(t.Context(), lc, nil) })
		}
		wg.Wait()
		elapsed = time.Since(start)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(results[0]) != len(results[1]) {
			t.Fatalf("A got %d requests, B %d", len(results[0]), len(results[1]))
		}
		for i, a := range results[0] {
			b := results[1][i]
			if a.Class != b.Class || a.Scheduled != b.Scheduled {
				t.Fatalf("request %d differs between the arms: %+v, %+v", i, a, b)
			}
			pair := strconv.Itoa(i)
			recs = append(recs,
				record.New(a.Scheduled, exporter.ConfigProduction, a.Class, "", a.Observation()),
				record.New(a.Sent, exporter.ConfigA, a.Class, pair, a.Observation()),
				record.New(b.Sent, exporter.ConfigB, b.Class, pair, b.Observation()))
		}
	})
	return recs, elapsed
}

// TestDefaultDemoIsConclusive checks item 7 of the demo's promise: with
// default flags the report's TTFT p95 verdict is B slower on fresh prompts,
// faster on repeated prefixes, and conclusive on the mix, for at least 19
// of 20 seeds.
func TestDefaultDemoIsConclusive(t *testing.T) {
	if testing.Short() {
		t.Skip("20 demo runs in virtual time")
	}
	c := defaultConfig(t)
	want := map[string]string{exporter.ClassFresh: verdict.Slower, exporter.ClassRepeatedPrefix: verdict.Faster}
	seeds := int64(20)
	if raceEnabled {
		// The race detector checks the code, not the statistics: two
		// seeds, both of which must show the verdicts.
		seeds = 2
	}
	failed := 0
	t.Logf("--rate %g --duration %s", c.Rate, c.Duration)
	t.Logf("%-4s  %-16s  %-16s  %-16s  %s", "seed", "fresh", "repeated_prefix", "mixed", "pairs (fresh/repeated), load and drain")
	for seed := int64(1); seed <= seeds; seed++ {
		c.Seed = seed
		recs, elapsed := virtualRecords(t, c)
		if elapsed > 90*time.Second {
			t.Errorf("seed %d: the load and its drain took %s, more than 90s", seed, elapsed)
		}
		rep, err := report.FromRecords(recs, record.ReadStats{}, report.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{report.MixedClass: rep.Mixed.TTFTP95Verdict}
		pairs := map[string]int{}
		for _, cl := range rep.Classes {
			got[cl.Class] = cl.TTFTP95Verdict
			pairs[cl.Class] = cl.Pairs.BothCompleted
		}
		ok := verdict.Conclusive(got[report.MixedClass])
		for class, v := range want {
			ok = ok && got[class] == v
		}
		mark := ""
		if !ok {
			failed++
			mark = "  <- not the demo's point"
		}
		t.Logf("%-4d  %-16s  %-16s  %-16s  %d/%d, %.1fs%s", seed, got[exporter.ClassFresh], got[exporter.ClassRepeatedPrefix],
			got[report.MixedClass], pairs[exporter.ClassFresh], pairs[exporter.ClassRepeatedPrefix], elapsed.Seconds(), mark)
	}
	if allowed := seeds / 20; failed > int(allowed) {
		t.Errorf("%d of %d seeds missed the demo's verdicts; at most %d may", failed, seeds, allowed)
	}
}
