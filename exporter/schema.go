// Package exporter owns tandem's metric schema: every metric name, label name
// and label value that dashboards, rules and the report depend on is declared
// here, and nowhere else. It also registers the metrics and records
// observations (New), serves /metrics and the health probes (Handler), and
// reads the metrics back from a Gatherer (Gather) for the status page and
// the demo: the package that names the metrics is the one that reads them
// by name. The status page is exporter/statuspage; native histogram math is
// exporter/nativehist.
package exporter

// Values of the config label.
const (
	ConfigProduction = "production"
	ConfigA          = "A"
	ConfigB          = "B"
)

// Configs lists every config label value, production first.
var Configs = []string{ConfigProduction, ConfigA, ConfigB}

// Arms lists the two mirrored configurations under comparison.
var Arms = []string{ConfigA, ConfigB}

// Built-in workload classes. Operators may allow more through
// TANDEM_EXTRA_CLASSES.
const (
	ClassFresh          = "fresh"
	ClassRepeatedPrefix = "repeated_prefix"
)

// BuiltinClasses lists the classes the prefix classifier decides between.
var BuiltinClasses = []string{ClassFresh, ClassRepeatedPrefix}

// Values of the outcome label of tandem_requests_total.
const (
	OutcomeCompleted  = "completed"  // 2xx and the stream ended properly
	OutcomeError      = "error"      // non-2xx status, transport failure or an error reported in the body
	OutcomeTimeout    = "timeout"    // the shadow timeout expired first
	OutcomeCanceled   = "canceled"   // the client went away or tandem shut down
	OutcomeIncomplete = "incomplete" // the stream was cut before its end
	OutcomeTruncated  = "truncated"  // tandem stopped measuring at its own limits: a shadow over its read limits (then also cut), or a frame over the buffer budget
)

// Outcomes lists every outcome label value.
var Outcomes = []string{OutcomeCompleted, OutcomeError, OutcomeTimeout, OutcomeCanceled, OutcomeIncomplete, OutcomeTruncated}

// Values of the result label of tandem_pairs_total.
const (
	PairBothCompleted = "both_completed"
	PairAFailed       = "a_failed"
	PairBFailed       = "b_failed"
	PairBothFailed    = "both_failed"
)

// PairResults lists every pair result label value.
var PairResults = []string{PairBothCompleted, PairAFailed, PairBFailed, PairBothFailed}

// Values of the reason label of tandem_mirror_skipped_total.
const (
	SkipOverloaded   = "overloaded"     // an arm was at its in-flight limit; neither arm got the request
	SkipBodyTooLarge = "body_too_large" // body over TANDEM_MIRROR_MAX_BODY_BYTES
	SkipInvalidBody  = "invalid_body"   // body is not a JSON object with messages, input or prompt of a supported shape
	SkipUnsupported  = "unsupported"    // mirrored path, but a method or content type tandem does not mirror
	SkipOverBudget   = "over_budget"    // TANDEM_MAX_BUFFERED_BYTES was spent; the request went to production unmeasured
)

// SkipReasons lists every skip reason label value.
var SkipReasons = []string{SkipOverloaded, SkipBodyTooLarge, SkipInvalidBody, SkipUnsupported, SkipOverBudget}

// Values of the reason label of tandem_records_dropped_total.
const (
	RecordDropQueueFull  = "queue_full"  // the disk fell behind (or tandem was shutting down)
	RecordDropWriteError = "write_error" // writing the record file failed
)

// RecordDropReasons lists every record drop reason label value.
var RecordDropReasons = []string{RecordDropQueueFull, RecordDropWriteError}

// Label names.
const (
	LabelConfig  = "config"
	LabelClass   = "class"
	LabelOutcome = "outcome"
	LabelResult  = "result"
	LabelReason  = "reason"
)

// Metric names. The histograms are native histograms: query them with
// histogram_quantile, histogram_fraction and friends, never through _bucket.
const (
	MetricTimeToFirstToken         = "tandem_time_to_first_token_seconds"
	MetricInterTokenLatency        = "tandem_inter_token_latency_seconds"
	MetricRequestDuration          = "tandem_request_duration_seconds"
	MetricRequests                 = "tandem_requests_total"
	MetricOutputTokens             = "tandem_output_tokens_total"
	MetricPromptTokens             = "tandem_prompt_tokens_total"
	MetricCachedPromptTokens       = "tandem_cached_prompt_tokens_total"
	MetricEstimatedTokenCounts     = "tandem_estimated_token_counts_total"
	MetricImplausibleUsage         = "tandem_implausible_usage_total"
	MetricPairs                    = "tandem_pairs_total"
	MetricPairOutputTokensMismatch = "tandem_pair_output_tokens_mismatch_total"
	MetricTTFTDifference           = "tandem_ttft_difference_seconds"
	MetricMirrorSkipped            = "tandem_mirror_skipped_total"
	MetricShadowInFlight           = "tandem_shadow_in_flight"
	MetricBufferedBytes            = "tandem_buffered_bytes"
	MetricConfigInfo               = "tandem_config_info"
	MetricBuildInfo                = "tandem_build_info"
	MetricRecordWriteErrors        = "tandem_record_write_errors_total"
	MetricRecordsDropped           = "tandem_records_dropped_total"
	MetricClassifierFallback       = "tandem_classifier_fallback_total"
)

// Native histogram settings shared by every tandem histogram. A factor of
// 1.05 gives schema 4 (buckets about 4.4% wide), so a quantile read from a
// bucket is within about 2.2% of the true value.
const (
	NativeHistogramBucketFactor    = 1.05
	NativeHistogramMaxBucketNumber = 320
)
