// Package verdict is the one vocabulary in which tandem judges B against A,
// and the thresholds every judge shares: the report (from records and from
// Prometheus), the alert rules, the status page and the demo.
//
// A latency verdict reads a confidence interval of B - A against an
// equivalence margin around zero:
//
//	interval entirely above zero         slower (B takes longer)
//	interval entirely below zero         faster
//	  ... unless it also lies inside ±margin: equivalent
//	interval holds zero, inside ±margin  equivalent
//	interval holds zero, leaves ±margin  inconclusive
//
// Rates read the same way with higher and lower in place of slower and
// faster. insufficient_data means too few pairs to judge; invalid means the
// arms did not do comparable work (they completed different requests, or,
// for rates, produced different token counts), so no interval is read.
package verdict

import "math"

// Verdicts of B relative to A.
const (
	Faster           = "faster"
	Slower           = "slower"
	Higher           = "higher"
	Lower            = "lower"
	Equivalent       = "equivalent"
	Inconclusive     = "inconclusive"
	InsufficientData = "insufficient_data"
	Invalid          = "invalid"
)

// Thresholds shared by every judge of A against B.
const (
	// Margin is the default equivalence margin, a fraction of A's value: B
	// and A are equivalent when the whole interval of B - A lies within
	// ±Margin·A.
	Margin = 0.05
	// MinPairs is the default number of pairs both arms completed that a
	// class needs before any verdict other than insufficient_data.
	MinPairs = 200
	// Level is the confidence level of every interval a verdict reads.
	Level = 0.95
)

// Conclusive reports whether v states a direction or an equivalence.
func Conclusive(v string) bool {
	switch v {
	case Faster, Slower, Higher, Lower, Equivalent:
		return true
	}
	return false
}

// Latency reads the verdict of the interval [lo, hi] of B - A for a
// quantity where more is worse (a latency), with margin the equivalence
// margin in the quantity's units. An interval with a bound that is not
// finite is insufficient_data.
func Latency(lo, hi, margin float64) string { return read(lo, hi, margin, Faster, Slower) }

// Rate reads the verdict of the interval [lo, hi] of B - A for a quantity
// where more is better (a rate), as Latency does.
func Rate(lo, hi, margin float64) string { return read(lo, hi, margin, Lower, Higher) }

func read(lo, hi, margin float64, below, above string) string {
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(margin):
		return InsufficientData
	case lo >= -margin && hi <= margin:
		return Equivalent
	case hi < 0:
		return below
	case lo > 0:
		return above
	}
	return Inconclusive
}
