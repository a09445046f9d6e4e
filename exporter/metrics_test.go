package exporter_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/exporter/nativehist"
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

// TestExposition is the schema test: the text exposition of counters and
// info metrics after a small known set of observations.
func TestExposition(t *testing.T) {
	reg, m := newMetrics(t)
	m.ObserveRequest(exporter.ConfigProduction, exporter.ClassFresh, completed(100*time.Millisecond, 10))
	a, b := completed(120*time.Millisecond, 10), completed(90*time.Millisecond, 11)
	a.CachedPromptTokens = 64
	a.TokensEstimated = true
	m.ObserveRequest(exporter.ConfigA, exporter.ClassRepeatedPrefix, a)
	m.ObserveRequest(exporter.ConfigB, exporter.ClassRepeatedPrefix, b)
	m.ObservePair(exporter.ClassRepeatedPrefix, a, b)
	timeout := exporter.Observation{Outcome: exporter.OutcomeTimeout, ImplausibleUsage: true}
	m.ObserveRequest(exporter.ConfigB, exporter.ClassFresh, timeout)
	m.ObservePair(exporter.ClassFresh, completed(80*time.Millisecond, 3), timeout)
	m.MirrorSkipped(exporter.SkipUnsupported)
	m.ShadowInFlight(exporter.ConfigA).Inc()
	m.RecordWriteError()
	m.RecordWriteError()
	m.RecordsDropped(exporter.RecordDropWriteError, 5)
	m.ClassifierFallback()

	f, err := os.Open("testdata/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(reg, f,
		exporter.MetricRequests, exporter.MetricOutputTokens, exporter.MetricPromptTokens,
		exporter.MetricCachedPromptTokens, exporter.MetricEstimatedTokenCounts, exporter.MetricImplausibleUsage, exporter.MetricPairs,
		exporter.MetricPairOutputTokensMismatch, exporter.MetricMirrorSkipped, exporter.MetricShadowInFlight,
		exporter.MetricConfigInfo, exporter.MetricRecordWriteErrors, exporter.MetricRecordsDropped, exporter.MetricClassifierFallback,
	); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == exporter.MetricBuildInfo })
	if i < 0 || len(mfs[i].GetMetric()) != 1 {
		t.Fatal("no single tandem_build_info series")
	}
	labels := map[string]string{}
	for _, l := range mfs[i].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "test" || labels["revision"] != "rev" || !strings.HasPrefix(labels["goversion"], "go") {
		t.Errorf("build info labels = %v", labels)
	}
}

func TestHandlerProtobufScrapeAndProbes(t *testing.T) {
	reg, m := newMetrics(t)
	for _, v := range []float64{0.05, 0.1, 0.2, 0.4} {
		m.ObserveRequest(exporter.ConfigA, exporter.ClassFresh, completed(seconds(v), 4))
	}
	ready := false
	srv := httptest.NewServer(exporter.Handler(reg, func() bool { return ready }, nil))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("response format %q, want delimited protobuf", format)
	}
	dec := expfmt.NewDecoder(resp.Body, format)
	var ttft *dto.Histogram
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		if mf.GetName() != exporter.MetricTimeToFirstToken {
			continue
		}
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("type %v", mf.GetType())
		}
		for _, s := range mf.GetMetric() {
			var config, class string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case exporter.LabelConfig:
					config = l.GetValue()
				case exporter.LabelClass:
					class = l.GetValue()
				}
			}
			if config == exporter.ConfigA && class == exporter.ClassFresh {
				ttft = s.GetHistogram()
			}
		}
	}
	if ttft == nil {
		t.Fatal("no tandem_time_to_first_token_seconds{config=A,class=fresh} in the protobuf scrape")
	}
	if ttft.GetSchema() != 4 || len(ttft.GetPositiveSpan()) == 0 || len(ttft.GetPositiveDelta()) == 0 || ttft.GetSampleCount() != 4 {
		t.Fatalf("native histogram = schema %d, spans %v, deltas %v, count %d; want schema 4 with buckets for 4 observations",
			ttft.GetSchema(), ttft.GetPositiveSpan(), ttft.GetPositiveDelta(), ttft.GetSampleCount())
	}
	if len(ttft.GetBucket()) != 0 {
		t.Errorf("classic buckets present: %v", ttft.GetBucket())
	}
	h, err := nativehist.FromProto(ttft)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Quantile(1); got < 0.4 || got > 0.4*1.05 {
		t.Errorf("max from the scraped histogram = %v, want the bucket holding 0.4", got)
	}

	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/-/healthy"); code != http.StatusOK {
		t.Errorf("/-/healthy = %d", code)
	}
	if code := get("/-/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready before ready = %d, want 503", code)
	}
	ready = true
	if code := get("/-/ready"); code != http.StatusOK {
		t.Errorf("/-/ready when ready = %d, want 200", code)
	}
	if code := get("/"); code != http.StatusNotFound {
		t.Errorf("/ without a status page = %d, want 404", code)
	}
}
