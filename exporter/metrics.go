package exporter

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Observation is the measurement of one request on one config. Every timing
// starts when tandem hands the request to the upstream's transport.
type Observation struct {
	Outcome string
	// FirstToken is set when a frame carrying output arrived; TTFT is then
	// the time from hand-off to that frame's arrival.
	FirstToken bool
	TTFT       time.Duration
	// LastToken is the time from hand-off to the last frame carrying output.
	LastToken time.Duration
	// Duration is the time from hand-off to the end of the response body.
	Duration time.Duration
	// OutputTokens comes from the server's usage report, or, when none
	// arrived, from counting output frames (TokensEstimated is then true).
	OutputTokens       int
	TokensEstimated    bool
	PromptTokens       int
	CachedPromptTokens int
	// ImplausibleUsage is set when the server's usage report was ignored
	// because it cannot be true (a count above ten million tokens, or more
	// cached than prompt tokens): the counts are then as if none arrived.
	ImplausibleUsage bool
	// FinishReason is the last finish_reason of a chat or completions
	// response; of a Responses API response, the reason it is incomplete,
	// else its status. It is at most 64 bytes: a longer one reads "other".
	FinishReason string
}

// InterTokenLatency is (last output frame - first output frame) / (tokens - 1).
// It reports false when the request has fewer than two output tokens.
func (o Observation) InterTokenLatency() (time.Duration, bool) {
	if !o.FirstToken || o.OutputTokens < 2 || o.LastToken < o.TTFT {
		return 0, false
	}
	return (o.LastToken - o.TTFT) / time.Duration(o.OutputTokens-1), true
}

// OutputSpeed is the per-request output speed of a completed request,
// output tokens per second after the first: (tokens - 1) / (last output
// frame - first output frame). It reports false when that is undefined.
func (o Observation) OutputSpeed() (float64, bool) {
	span := o.LastToken.Seconds() - o.TTFT.Seconds()
	if o.Outcome != OutcomeCompleted || !o.FirstToken || o.OutputTokens < 2 || span <= 0 {
		return 0, false
	}
	return float64(o.OutputTokens-1) / span, true
}

// Info describes one configuration for tandem_config_info.
type Info struct {
	Config string
	Name   string
	Model  string
}

// Metrics holds every tandem metric. Label values come only from the fixed
// sets in schema.go and the operator's class allowlist.
type Metrics struct {
	ttft          *prometheus.HistogramVec
	interToken    *prometheus.HistogramVec
	duration      *prometheus.HistogramVec
	requests      *prometheus.CounterVec
	outputTokens  *prometheus.CounterVec
	promptTokens  *prometheus.CounterVec
	cachedTokens  *prometheus.CounterVec
	estimated     *prometheus.CounterVec
	implausible   *prometheus.CounterVec
	pairs         *prometheus.CounterVec
	tokenMismatch *prometheus.CounterVec
	ttftDiff      *prometheus.HistogramVec
	skipped       *prometheus.CounterVec
	inFlight      *prometheus.GaugeVec
	buffered      prometheus.Gauge
	recordErrors  prometheus.Counter
	recordsLost   *prometheus.CounterVec
	fallback      prometheus.Counter
}

func nativeHistogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            name,
		Help:                            help,
		NativeHistogramBucketFactor:     NativeHistogramBucketFactor,
		NativeHistogramMaxBucketNumber:  NativeHistogramMaxBucketNumber,
		NativeHistogramMinResetDuration: time.Hour,
	}, labels)
}

// New registers tandem's metrics on reg. classes are the workload classes in
// use (built-in and allowlisted); their series exist from the start, so a
// dashboard shows zero rather than no data. infos feed tandem_config_info.
func New(reg prometheus.Registerer, classes []string, infos []Info, version, revision string) *Metrics {
	m := &Metrics{
		ttft: nativeHistogram(MetricTimeToFirstToken,
			"Time to first token of completed requests: from tandem handing the request to the upstream's transport to the arrival of the first response frame carrying output (content, reasoning, tool call or completion text), stamped before JSON decoding. Role-only, empty and usage-only frames do not count.",
			LabelConfig, LabelClass),
		interToken: nativeHistogram(MetricInterTokenLatency,
			"Inter-token latency of completed requests with at least two output tokens: (arrival of the last output frame - arrival of the first output frame) / (output tokens - 1).",
			LabelConfig, LabelClass),
		duration: nativeHistogram(MetricRequestDuration,
			"Duration of completed requests: from tandem handing the request to the upstream's transport to the end of the response body.",
			LabelConfig, LabelClass),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Requests measured, by outcome: completed (2xx, stream ended properly), error (non-2xx, transport failure or an error reported in the body), timeout, canceled, incomplete (stream cut before its end), truncated (a shadow tandem cut over its read limits).",
		}, []string{LabelConfig, LabelClass, LabelOutcome}),
		outputTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricOutputTokens,
			Help: "Output tokens of completed requests: the server's usage.completion_tokens, or the count of output frames when the server sent no usage.",
		}, []string{LabelConfig, LabelClass}),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPromptTokens,
			Help: "Prompt tokens of completed requests, as reported by the server's usage.",
		}, []string{LabelConfig, LabelClass}),
		cachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricCachedPromptTokens,
			Help: "Cached prompt tokens of completed requests, as reported by the server (usage.prompt_tokens_details.cached_tokens).",
		}, []string{LabelConfig, LabelClass}),
		estimated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricEstimatedTokenCounts,
			Help: "Completed requests whose output tokens were counted from output frames because the server sent no usage.",
		}, []string{LabelConfig}),
		implausible: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricImplausibleUsage,
			Help: "Requests of any outcome whose usage report was ignored because it cannot be true: a count above ten million tokens, or more cached than prompt tokens. Their output tokens were counted from output frames.",
		}, []string{LabelConfig}),
		pairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPairs,
			Help: "Mirrored requests by the outcome of both arms: both_completed, a_failed, b_failed, both_failed.",
		}, []string{LabelClass, LabelResult}),
		tokenMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPairOutputTokensMismatch,
			Help: "Pairs in which both arms completed but produced different output token counts.",
		}, []string{LabelClass}),
		ttftDiff: nativeHistogram(MetricTTFTDifference,
			"Paired TTFT difference, TTFT(B) - TTFT(A), of the same mirrored request when both arms completed; negative means B was faster.",
			LabelClass),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricMirrorSkipped,
			Help: "Requests on mirrored paths that were not mirrored, by reason: overloaded (sampled, but an arm was at its in-flight limit, so neither got it), body_too_large, invalid_body, unsupported, over_budget (TANDEM_MAX_BUFFERED_BYTES spent: sent to production unmeasured).",
		}, []string{LabelReason}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricShadowInFlight,
			Help: "Mirrored requests currently in flight to an arm.",
		}, []string{LabelConfig}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricBufferedBytes,
			Help: "Bytes tandem holds for measurement now (request bodies, their prompts, mirrored bodies, partial stream frames), bounded by TANDEM_MAX_BUFFERED_BYTES.",
		}),
		recordErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricRecordWriteErrors,
			Help: "Failed attempts to write, rotate or open the record file (TANDEM_RECORD_PATH). Recording goes on and retries; requests are never affected.",
		}),
		recordsLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRecordsDropped,
			Help: "Per-request records lost, by reason: queue_full (the disk fell behind, or tandem was shutting down), write_error (writing the record file failed).",
		}, []string{LabelReason}),
		fallback: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricClassifierFallback,
			Help: "Classifications answered by the replica's own prefix index because the shared one (TANDEM_CLASSIFIER_REDIS_URL) failed, timed out or was being waited out. Requests are never affected.",
		}),
	}
	configInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricConfigInfo,
		Help: "Human name and model of each config; always 1.",
	}, []string{LabelConfig, "name", "model"})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricBuildInfo,
		Help: "tandem build; always 1.",
	}, []string{"version", "revision", "goversion"})

	reg.MustRegister(m.ttft, m.interToken, m.duration, m.requests, m.outputTokens,
		m.promptTokens, m.cachedTokens, m.estimated, m.implausible, m.pairs, m.tokenMismatch,
		m.ttftDiff, m.skipped, m.inFlight, m.buffered, m.recordErrors, m.recordsLost, m.fallback, configInfo, buildInfo)

	configs := []string{ConfigProduction}
	for _, in := range infos {
		configInfo.WithLabelValues(in.Config, in.Name, in.Model).Set(1)
		if in.Config != ConfigProduction {
			configs = append(configs, in.Config)
		}
	}
	buildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)

	for _, class := range classes {
		for _, config := range configs {
			m.ttft.WithLabelValues(config, class)
			m.interToken.WithLabelValues(config, class)
			m.duration.WithLabelValues(config, class)
			m.outputTokens.WithLabelValues(config, class)
			m.promptTokens.WithLabelValues(config, class)
			m.cachedTokens.WithLabelValues(config, class)
			for _, outcome := range Outcomes {
				m.requests.WithLabelValues(config, class, outcome)
			}
		}
		if len(configs) > 1 {
			for _, result := range PairResults {
				m.pairs.WithLabelValues(class, result)
			}
			m.tokenMismatch.WithLabelValues(class)
			m.ttftDiff.WithLabelValues(class)
		}
	}
	for _, config := range configs {
		m.estimated.WithLabelValues(config)
		m.implausible.WithLabelValues(config)
		if config != ConfigProduction {
			m.inFlight.WithLabelValues(config)
		}
	}
	if len(configs) > 1 {
		for _, reason := range SkipReasons {
			m.skipped.WithLabelValues(reason)
		}
	}
	for _, reason := range RecordDropReasons {
		m.recordsLost.WithLabelValues(reason)
	}
	return m
}

// ObserveRequest records one request's measurement. Timing histograms and
// token counters take completed requests only, so both arms are compared on
// the same kind of request.
func (m *Metrics) ObserveRequest(config, class string, o Observation) {
	m.requests.WithLabelValues(config, class, o.Outcome).Inc()
	if o.ImplausibleUsage {
		m.implausible.WithLabelValues(config).Inc()
	}
	if o.Outcome != OutcomeCompleted {
		return
	}
	if o.FirstToken {
		m.ttft.WithLabelValues(config, class).Observe(o.TTFT.Seconds())
	}
	if itl, ok := o.InterTokenLatency(); ok {
		m.interToken.WithLabelValues(config, class).Observe(itl.Seconds())
	}
	m.duration.WithLabelValues(config, class).Observe(o.Duration.Seconds())
	m.outputTokens.WithLabelValues(config, class).Add(float64(o.OutputTokens))
	m.promptTokens.WithLabelValues(config, class).Add(float64(o.PromptTokens))
	m.cachedTokens.WithLabelValues(config, class).Add(float64(o.CachedPromptTokens))
	if o.TokensEstimated {
		m.estimated.WithLabelValues(config).Inc()
	}
}

// ObservePair records the joint result of one mirrored request on A and B.
func (m *Metrics) ObservePair(class string, a, b Observation) {
	aOK, bOK := a.Outcome == OutcomeCompleted, b.Outcome == OutcomeCompleted
	m.pairs.WithLabelValues(class, PairResult(aOK, bOK)).Inc()
	if !aOK || !bOK {
		return
	}
	if a.OutputTokens != b.OutputTokens {
		m.tokenMismatch.WithLabelValues(class).Inc()
	}
	if a.FirstToken && b.FirstToken {
		m.ttftDiff.WithLabelValues(class).Observe((b.TTFT - a.TTFT).Seconds())
	}
}

// PairResult names the joint outcome of a pair.
func PairResult(aCompleted, bCompleted bool) string {
	switch {
	case aCompleted && bCompleted:
		return PairBothCompleted
	case bCompleted:
		return PairAFailed
	case aCompleted:
		return PairBFailed
	default:
		return PairBothFailed
	}
}

// MirrorSkipped counts a request on a mirrored path that was not mirrored.
func (m *Metrics) MirrorSkipped(reason string) {
	m.skipped.WithLabelValues(reason).Inc()
}

// ShadowInFlight is the in-flight gauge of one arm.
func (m *Metrics) ShadowInFlight(config string) prometheus.Gauge {
	return m.inFlight.WithLabelValues(config)
}

// BufferedBytes is the gauge of bytes held for measurement.
func (m *Metrics) BufferedBytes() prometheus.Gauge { return m.buffered }

// RecordWriteError counts a failed attempt to write, rotate or open the
// record file.
func (m *Metrics) RecordWriteError() {
	m.recordErrors.Inc()
}

// RecordsDropped counts n records lost for reason, one of RecordDropReasons.
func (m *Metrics) RecordsDropped(reason string, n int) {
	m.recordsLost.WithLabelValues(reason).Add(float64(n))
}

// ClassifierFallback counts a classification answered by the local prefix
// index instead of the shared one.
func (m *Metrics) ClassifierFallback() { m.fallback.Inc() }

// BuildRevision returns the VCS revision the binary was built from, or
// "unknown".
func BuildRevision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
