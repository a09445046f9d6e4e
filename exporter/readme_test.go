package exporter

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEMetricTable keeps the README's metric table in step with the schema.
func TestREADMEMetricTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		MetricTimeToFirstToken, MetricInterTokenLatency, MetricRequestDuration, MetricRequests,
		MetricOutputTokens, MetricPromptTokens, MetricCachedPromptTokens, MetricEstimatedTokenCounts,
		MetricImplausibleUsage, MetricPairs, MetricPairOutputTokensMismatch, MetricTTFTDifference,
		MetricMirrorSkipped, MetricShadowInFlight, MetricBufferedBytes, MetricConfigInfo, MetricBuildInfo,
		MetricRecordWriteErrors, MetricRecordsDropped, MetricClassifierFallback,
	} {
		if !strings.Contains(string(readme), "| `"+name+"` |") {
			t.Errorf("README.md's metric table lacks %s", name)
		}
	}
}
