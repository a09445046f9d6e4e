package statuspage_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
	"github.com/kestrelops/tandem/exporter/statuspage"
)

var testInfos = []exporter.Info{
	{Config: exporter.ConfigProduction, Name: "production"},
	{Config: exporter.ConfigA, Name: "vllm-baseline", Model: "llama-3.1-8b"},
	{Config: exporter.ConfigB, Name: "vllm-chunked-prefill", Model: "llama-3.1-8b"},
}

func newMetrics(t testing.TB) (*prometheus.Registry, *exporter.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return reg, exporter.New(reg, exporter.BuiltinClasses, testInfos, "test", "rev")
}

func completed(ttft time.Duration, tokens int) exporter.Observation {
	return exporter.Observation{
		Outcome:      exporter.OutcomeCompleted,
		FirstToken:   true,
		TTFT:         ttft,
		LastToken:    ttft + time.Duration(tokens)*20*time.Millisecond,
		Duration:     ttft + time.Duration(tokens)*20*time.Millisecond + time.Millisecond,
		OutputTokens: tokens,
		PromptTokens: 100,
	}
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

func lognormal(seed uint64, n int, mu, sigma float64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Exp(mu + sigma*r.NormFloat64())
	}
	return out
}

// exactQuantile is the nearest-rank quantile of values.
func exactQuantile(values []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(values))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// gathered returns the histogram name of one config and class.
func gathered(t *testing.T, reg prometheus.Gatherer, name, config, class string) *nativehist.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[exporter.LabelClass] == class && (config == "" || labels[exporter.LabelConfig] == config) {
				h, err := nativehist.FromProto(m.GetHistogram())
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
		}
	}
	t.Fatalf("no %s{config=%q,class=%q}", name, config, class)
	return nil
}

func mustStatus(t *testing.T, p *statuspage.Page) statuspage.Status {
	t.Helper()
	st, err := p.Status()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func classStatus(t *testing.T, st statuspage.Status, class string) statuspage.ClassStatus {
	t.Helper()
	for _, c := range st.Classes {
		if c.Class == class {
			return c
		}
	}
	t.Fatalf("no class %q in %+v", class, st.Classes)
	return statuspage.ClassStatus{}
}

func configStatus(t *testing.T, c statuspage.ClassStatus, config string) statuspage.ConfigStatus {
	t.Helper()
	s, ok := c.Config(config)
	if !ok {
		t.Fatalf("class %s has no config %s", c.Class, config)
	}
	return s
}

func value(t *testing.T, what string, v *float64) float64 {
	t.Helper()
	if v == nil {
		t.Fatalf("%s: no value", what)
	}
	return *v
}

func TestStatusNumbersMatchHistogramsAndInputs(t *testing.T) {
	reg, m := newMetrics(t)
	ttfts := map[string][]float64{
		exporter.ConfigProduction: lognormal(10, 2000, math.Log(0.20), 0.5),
		exporter.ConfigA:          lognormal(11, 2000, math.Log(0.25), 0.5),
		exporter.ConfigB:          lognormal(12, 2000, math.Log(0.18), 0.4),
	}
	for config, vs := range ttfts {
		for _, v := range vs {
			m.ObserveRequest(config, exporter.ClassFresh, completed(seconds(v), 10))
		}
	}
	for range 7 {
		m.ObserveRequest(exporter.ConfigB, exporter.ClassFresh, exporter.Observation{Outcome: exporter.OutcomeError})
	}
	for range 3 {
		m.ObserveRequest(exporter.ConfigB, exporter.ClassFresh, exporter.Observation{Outcome: exporter.OutcomeTimeout})
	}
	for i := range 2000 {
		a, b := completed(seconds(ttfts[exporter.ConfigA][i]), 10), completed(seconds(ttfts[exporter.ConfigB][i]), 10)
		if i < 10 {
			b = exporter.Observation{Outcome: exporter.OutcomeError}
		}
		if i >= 10 && i < 15 {
			b.OutputTokens = 11
		}
		m.ObservePair(exporter.ClassFresh, a, b)
	}
	for range 4 {
		m.MirrorSkipped(exporter.SkipOverloaded)
	}
	m.MirrorSkipped(exporter.SkipInvalidBody)

	st := mustStatus(t, statuspage.New(t.Context(), reg, statuspage.Options{}))
	fresh := classStatus(t, st, exporter.ClassFresh)
	for _, config := range exporter.Configs {
		s := configStatus(t, fresh, config)
		if s.Completed != 2000 {
			t.Errorf("%s completed = %v, want 2000", config, s.Completed)
		}
		h := gathered(t, reg, exporter.MetricTimeToFirstToken, config, exporter.ClassFresh)
		for q, got := range map[float64]*float64{0.5: s.TTFTP50Seconds, 0.95: s.TTFTP95Seconds, 0.99: s.TTFTP99Seconds} {
			v := value(t, config+" TTFT quantile", got)
			if want := h.Quantile(q); v != want {
				t.Errorf("%s q%v = %v, quantile of the gathered histogram = %v", config, q, v, want)
			}
			if exact := exactQuantile(ttfts[config], q); math.Abs(v-exact)/exact > 0.03 {
				t.Errorf("%s q%v = %v, exact %v: more than 3%% off", config, q, v, exact)
			}
		}
	}
	if got := configStatus(t, fresh, exporter.ConfigB).Failed; got != 10 {
		t.Errorf("B failed = %v, want 10", got)
	}
	wantPairs := map[string]float64{exporter.PairBothCompleted: 1990, exporter.PairBFailed: 10, exporter.PairAFailed: 0, exporter.PairBothFailed: 0}
	if !mapsEqual(fresh.Pairs, wantPairs) {
		t.Errorf("pairs = %v, want %v", fresh.Pairs, wantPairs)
	}
	if fresh.OutputTokensMismatch != 5 {
		t.Errorf("token mismatches = %v, want 5", fresh.OutputTokensMismatch)
	}
	diff := gathered(t, reg, exporter.MetricTTFTDifference, "", exporter.ClassFresh)
	if got, want := value(t, "TTFT difference p50", fresh.TTFTDifferenceP50Seconds), diff.Quantile(0.5); got != want {
		t.Errorf("TTFT difference p50 = %v, want %v", got, want)
	}
	wantSkipped := map[string]float64{exporter.SkipOverloaded: 4, exporter.SkipInvalidBody: 1, exporter.SkipBodyTooLarge: 0, exporter.SkipUnsupported: 0, exporter.SkipOverBudget: 0}
	if !mapsEqual(st.MirrorSkipped, wantSkipped) {
		t.Errorf("skipped = %v, want %v", st.MirrorSkipped, wantSkipped)
	}
	repeated := classStatus(t, st, exporter.ClassRepeatedPrefix)
	if s := configStatus(t, repeated, exporter.ConfigA); s.Completed != 0 || s.TTFTP95Seconds != nil {
		t.Errorf("repeated_prefix A without traffic = %+v, want zero and no p95", s)
	}
	if got := []string{st.Classes[0].Class, st.Classes[1].Class}; !slices.Equal(got, exporter.BuiltinClasses) {
		t.Errorf("classes = %v, want %v", got, exporter.BuiltinClasses)
	}
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestStatusMixedP95ComesFromMergedHistogram(t *testing.T) {
	reg, m := newMetrics(t)
	// Many fast fresh requests and a few slow repeated-prefix ones: the
	// mixed p95 lies among the slow ones, far from the mean of class p95s.
	fast := lognormal(20, 1800, math.Log(0.08), 0.2)
	slow := lognormal(21, 200, math.Log(1.2), 0.2)
	for _, v := range fast {
		m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(seconds(v), 5))
	}
	for _, v := range slow {
		m.ObserveRequest(exporter.ConfigA, exporter.ClassRepeatedPrefix, completed(seconds(v), 5))
	}
	st := mustStatus(t, statuspage.New(t.Context(), reg, statuspage.Options{}))

	fresh := value(t, "fresh p95", configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigA).TTFTP95Seconds)
	repeated := value(t, "repeated p95", configStatus(t, classStatus(t, st, exporter.ClassRepeatedPrefix), exporter.ConfigA).TTFTP95Seconds)
	mixed := value(t, "mixed p95", configStatus(t, st.Mixed, exporter.ConfigA).TTFTP95Seconds)

	merged := nativehist.Sum(
		gathered(t, reg, exporter.MetricTimeToFirstToken, exporter.ConfigA, exporter.ClassFresh),
		gathered(t, reg, exporter.MetricTimeToFirstToken, exporter.ConfigA, exporter.ClassRepeatedPrefix))
	if want := merged.Quantile(0.95); mixed != want {
		t.Errorf("mixed p95 = %v, want %v from the merged histogram", mixed, want)
	}
	if exact := exactQuantile(append(slices.Clone(fast), slow...), 0.95); math.Abs(mixed-exact)/exact > 0.03 {
		t.Errorf("mixed p95 = %v, exact p95 of all requests %v", mixed, exact)
	}
	if avg := (fresh + repeated) / 2; math.Abs(mixed-avg)/avg < 0.2 {
		t.Errorf("mixed p95 = %v is close to the average of class p95s %v; the data set should tell them apart", mixed, avg)
	}
	if got := configStatus(t, st.Mixed, exporter.ConfigA).Completed; got != 2000 {
		t.Errorf("mixed completed = %v, want 2000", got)
	}
}

// The sampler ticks at 0 s, 5 s, 10 s...; the test acts half a second off
// that grid, so that no tick and no test step share an instant.
func TestStatusRatesOverWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		reg, m := newMetrics(t)
		for range 20 {
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 20))
		}
		p := statuspage.New(ctx, reg, statuspage.Options{Interval: 5 * time.Second, Window: time.Minute})

		st := mustStatus(t, p)
		a := configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigA)
		if !st.WarmingUp || a.RequestsPerSecond != nil || a.OutputTokensPerSecond != nil {
			t.Fatalf("with one snapshot: warming up %v, rates %v %v; want warming up and no rates", st.WarmingUp, a.RequestsPerSecond, a.OutputTokensPerSecond)
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if !strings.Contains(rec.Body.String(), "warming up") {
			t.Error("page does not say warming up")
		}

		for range 50 {
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 20))
			m.ObserveRequest(exporter.ConfigB, exporter.ClassRepeatedPrefix, completed(100*time.Millisecond, 8))
		}
		time.Sleep(5500 * time.Millisecond)
		st = mustStatus(t, p)
		if st.WarmingUp {
			t.Fatal("still warming up after two snapshots")
		}
		checkRate := func(st statuspage.ClassStatus, config string, wantReq, wantTok float64) {
			t.Helper()
			s := configStatus(t, st, config)
			if got := value(t, "requests/s", s.RequestsPerSecond); got != wantReq {
				t.Errorf("%s %s requests/s = %v, want %v", st.Class, config, got, wantReq)
			}
			if got := value(t, "tokens/s", s.OutputTokensPerSecond); got != wantTok {
				t.Errorf("%s %s tokens/s = %v, want %v", st.Class, config, got, wantTok)
			}
		}
		checkRate(classStatus(t, st, exporter.ClassFresh), exporter.ConfigA, 10, 200)
		checkRate(classStatus(t, st, exporter.ClassRepeatedPrefix), exporter.ConfigB, 10, 80)
		checkRate(st.Mixed, exporter.ConfigA, 10, 200)
		checkRate(st.Mixed, exporter.ConfigB, 10, 80)
		checkRate(st.Mixed, exporter.ConfigProduction, 0, 0)

		// Between ticks the rates stay those of the last snapshots.
		m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 20))
		time.Sleep(2 * time.Second)
		checkRate(classStatus(t, mustStatus(t, p), exporter.ClassFresh), exporter.ConfigA, 10, 200)

		// Snapshots at 0 s, 5 s and 10 s: 51 requests over 10 s.
		time.Sleep(3 * time.Second)
		checkRate(classStatus(t, mustStatus(t, p), exporter.ClassFresh), exporter.ConfigA, 5.1, 102)

		// Two minutes without a view: the sampler kept going, the window
		// holds the last minute of snapshots and nothing happened in it.
		time.Sleep(2 * time.Minute)
		st = mustStatus(t, p)
		if st.WarmingUp {
			t.Fatal("warming up after two minutes without a view")
		}
		checkRate(classStatus(t, st, exporter.ClassFresh), exporter.ConfigA, 0, 0)
		if got, want := statuspage.Snapshots(p), 13; got != want {
			t.Errorf("%d snapshots kept, want Window/Interval+1 = %d", got, want)
		}
	})
}

// TestStatusSamplesWithoutViews is the first view of a page on a proxy
// that has served steady traffic for an hour: it shows the rate of the
// last minute at once.
func TestStatusSamplesWithoutViews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		reg, m := newMetrics(t)
		p := statuspage.New(ctx, reg, statuspage.Options{Interval: 5 * time.Second, Window: time.Minute})
		time.Sleep(250 * time.Millisecond)
		for range 3600 {
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 10))
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 10))
			time.Sleep(time.Second)
		}
		st := mustStatus(t, p)
		if st.WarmingUp {
			t.Fatal("first view after an hour says warming up")
		}
		a := configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigA)
		if got := value(t, "requests/s", a.RequestsPerSecond); got != 2 {
			t.Errorf("requests/s = %v, want 2", got)
		}
		if got := value(t, "tokens/s", a.OutputTokensPerSecond); got != 20 {
			t.Errorf("tokens/s = %v, want 20", got)
		}
		if got, want := statuspage.Snapshots(p), 13; got != want {
			t.Errorf("%d snapshots kept after an hour, want %d", got, want)
		}
	})
}

func TestStatusRateAcrossCounterReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		before, m := newMetrics(t)
		for range 100 {
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 3))
		}
		after, m := newMetrics(t)
		for range 10 {
			m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(100*time.Millisecond, 3))
		}
		var current atomic.Pointer[prometheus.Registry]
		current.Store(before)
		g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return current.Load().Gather() })
		p := statuspage.New(ctx, g, statuspage.Options{Interval: 5 * time.Second})
		current.Store(after)
		time.Sleep(5500 * time.Millisecond)
		a := configStatus(t, classStatus(t, mustStatus(t, p), exporter.ClassFresh), exporter.ConfigA)
		if got := value(t, "requests/s", a.RequestsPerSecond); got != 2 {
			t.Errorf("requests/s across a reset = %v, want 10 requests over 5 s", got)
		}
		if got := value(t, "tokens/s", a.OutputTokensPerSecond); got != 6 {
			t.Errorf("tokens/s across a reset = %v, want 30 tokens over 5 s", got)
		}
	})
}

func TestStatusHTML(t *testing.T) {
	reg, m := newMetrics(t)
	for _, v := range lognormal(30, 300, math.Log(0.3), 0.5) {
		m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(seconds(v), 12))
		m.ObserveRequest(exporter.ConfigB, exporter.ClassFresh, completed(seconds(v*0.8), 12))
		m.ObservePair(exporter.ClassFresh, completed(seconds(v), 12), completed(seconds(v*0.8), 12))
	}
	m.MirrorSkipped(exporter.SkipBodyTooLarge)
	p := statuspage.New(t.Context(), reg, statuspage.Options{Refresh: 7 * time.Second})
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	for _, want := range []string{
		"<title>tandem status</title>",
		`<meta http-equiv="refresh" content="7">`,
		`<section data-class="fresh">`,
		`<section data-class="repeated_prefix">`,
		`<section data-class="mixed">`,
		"mixed (merged distribution)",
		"never an average of the class quantiles",
		`<svg class="ttft-chart" data-chart="fresh"`,
		`<path data-config="A"`,
		`<path data-config="B"`,
		`<tr data-reason="body_too_large"><td>body_too_large</td><td>1</td></tr>`,
		`<span data-result="both_completed">both_completed <b>300</b></span>`,
		"vllm-chunked-prefill",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	for _, external := range []string{"<script src", "<link", "@import", "url(", "https://"} {
		if strings.Contains(body, external) {
			t.Errorf("page references something external: %s", external)
		}
	}
	st := mustStatus(t, p)
	a := configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigA)
	b := configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigB)
	p95 := value(t, "A p95", a.TTFTP95Seconds) * 1000
	if want := `<td data-config="A">` + strconvMillis(p95) + `</td>`; !strings.Contains(body, want) {
		t.Errorf("page lacks A's p95 cell %s", want)
	}
	if *b.TTFTP95Seconds >= *a.TTFTP95Seconds {
		t.Fatalf("B p95 %v not below A p95 %v", *b.TTFTP95Seconds, *a.TTFTP95Seconds)
	}
	if !strings.Contains(body, `<td class="diff" data-config="B-A">-`) {
		t.Error("B−A column lacks a negative TTFT difference")
	}
}

// TestStatusRecordsAlert shows record write errors and lost records, and
// whether errors are still happening.
func TestStatusRecordsAlert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		reg, m := newMetrics(t)
		p := statuspage.New(ctx, reg, statuspage.Options{Interval: 5 * time.Second, Window: time.Minute})
		page := func() string {
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			return rec.Body.String()
		}
		if body := page(); strings.Contains(body, `id="records"`) {
			t.Fatal("records alert without record errors")
		}
		wantContains := func(body, want string) {
			t.Helper()
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %s", want)
			}
		}

		for range 3 {
			m.RecordWriteError()
		}
		m.RecordsDropped(exporter.RecordDropWriteError, 40)
		m.RecordsDropped(exporter.RecordDropQueueFull, 2)
		wantContains(page(), `records: 3 write errors since start; 42 records lost`)
		time.Sleep(5500 * time.Millisecond)
		wantContains(page(), `<p class="alert" id="records">records: 3 write errors, 3 in the last 60 s; 42 records lost (queue_full 2, write_error 40)</p>`)

		// Two minutes on, the errors are past.
		time.Sleep(2 * time.Minute)
		wantContains(page(), `records: 3 write errors, 0 in the last 60 s;`)
		st := mustStatus(t, p)
		if st.Records.WriteErrors != 3 || value(t, "recent write errors", st.Records.RecentWriteErrors) != 0 ||
			!mapsEqual(st.Records.Dropped, map[string]float64{exporter.RecordDropWriteError: 40, exporter.RecordDropQueueFull: 2}) {
			t.Errorf("records status = %+v", st.Records)
		}
	})
}

func strconvMillis(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.3f s", ms/1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}

func TestStatusJSON(t *testing.T) {
	reg, m := newMetrics(t)
	m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(150*time.Millisecond, 12))
	p := statuspage.New(t.Context(), reg, statuspage.Options{})
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	var st statuspage.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	a := configStatus(t, classStatus(t, st, exporter.ClassFresh), exporter.ConfigA)
	if a.Completed != 1 || a.TTFTP50Seconds == nil {
		t.Fatalf("A fresh = %+v, want one completed request with a p50", a)
	}
	if lo, hi := 0.140, 0.160; *a.TTFTP50Seconds < lo || *a.TTFTP50Seconds > hi {
		t.Errorf("p50 = %v, want within the bucket around 0.15", *a.TTFTP50Seconds)
	}
	if !st.WarmingUp || a.OutputTokensPerSecond != nil {
		t.Errorf("warming up %v, tokens/s %v: want warming up and null", st.WarmingUp, a.OutputTokensPerSecond)
	}
	if !strings.Contains(rec.Body.String(), `"ttft_p50_seconds": null`) {
		t.Error("a quantile without observations is not null in JSON")
	}
}

func TestStatusGatherError(t *testing.T) {
	failing := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, os.ErrDeadlineExceeded })
	rec := httptest.NewRecorder()
	statuspage.New(t.Context(), failing, statuspage.Options{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
}

// syntheticTraffic feeds realistic mirrored traffic: B (chunked prefill) is
// faster on repeated prefixes, slightly slower on fresh prompts.
func syntheticTraffic(m *exporter.Metrics, n int) {
	r := rand.New(rand.NewPCG(7, 7))
	for range n {
		class, base := exporter.ClassFresh, 0.32
		if r.Float64() < 0.4 {
			class, base = exporter.ClassRepeatedPrefix, 0.11
		}
		noise := math.Exp(0.35 * r.NormFloat64())
		tokens := 40 + r.IntN(200)
		prod := completed(seconds(base*noise), tokens)
		a := completed(seconds(base*noise*math.Exp(0.05*r.NormFloat64())), tokens)
		bFactor := 1.06
		if class == exporter.ClassRepeatedPrefix {
			bFactor = 0.7
		}
		b := completed(seconds(base*noise*bFactor*math.Exp(0.05*r.NormFloat64())), tokens)
		if r.Float64() < 0.01 {
			b = exporter.Observation{Outcome: exporter.OutcomeTimeout}
		}
		m.ObserveRequest(exporter.ConfigProduction, class, prod)
		m.ObserveRequest(exporter.ConfigA, class, a)
		m.ObserveRequest(exporter.ConfigB, class, b)
		m.ObservePair(class, a, b)
	}
	for range 12 {
		m.MirrorSkipped(exporter.SkipOverloaded)
	}
	m.MirrorSkipped(exporter.SkipBodyTooLarge)
}

var updateScreenshot = flag.Bool("update-screenshot", false, "write the status page screenshot to testdata/status.png")

// TestStatusPageInChromium loads the page in a real headless Chromium over
// realistic traffic, reads the per-class tables from the DOM and takes a
// full-page screenshot.
func TestStatusPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (%v); .ci/run installs it", err)
	}
	reg, m := newMetrics(t)
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var elapsed atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	page := statuspage.New(t.Context(), reg, statuspage.Options{Now: clock, Interval: 10 * time.Millisecond})
	syntheticTraffic(m, 3000)
	elapsed.Store(int64(30 * time.Second))
	for mustStatus(t, page).WarmingUp {
		time.Sleep(10 * time.Millisecond)
	}
	srv := httptest.NewServer(exporter.Handler(reg, func() bool { return true }, page))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 900),
	)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(ctx)
	defer cancelBrowser()

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title != "tandem status" {
		t.Errorf("title %q", title)
	}
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`
		Object.fromEntries([...document.querySelectorAll('section[data-class] tr[data-metric] td[data-config]')].map(td =>
			[td.closest('section').dataset.class + ' ' + td.closest('tr').dataset.metric + ' ' + td.dataset.config, td.innerText]))`))
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range append(slices.Clone(exporter.BuiltinClasses), "mixed") {
		for _, metric := range []string{"completed", "ttft_p50", "ttft_p95", "ttft_p99", "output_tokens_per_second", "requests_per_second"} {
			for _, config := range exporter.Configs {
				key := class + " " + metric + " " + config
				text, ok := cells[key]
				if !ok {
					t.Errorf("no cell for %s", key)
				}
				if !nonZeroNumber(text) {
					t.Errorf("%s shows %q, want a non-zero number", key, text)
				}
			}
		}
		paths, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`document.querySelectorAll('svg[data-chart=%q] path[data-config]').length`, class)))
		if err != nil {
			t.Fatal(err)
		}
		if paths != 2 {
			t.Errorf("chart of %s has %d distributions, want A and B", class, paths)
		}
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "status.png")
	if *updateScreenshot {
		out = filepath.Join("testdata", "status.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}

// nonZeroNumber reports whether text starts with a number other than zero,
// as "123.4 ms" or "17.25" do.
func nonZeroNumber(text string) bool {
	field, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	v, err := strconv.ParseFloat(field, 64)
	return err == nil && v != 0
}
