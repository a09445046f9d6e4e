package exporter

import (
	"errors"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Native histogram schemas run from -4 (buckets grow by 2^16) to 8 (by 2^(1/256)).
const (
	minNativeSchema = -4
	maxNativeSchema = 8
)

// NativeQuantile is PromQL's histogram_quantile(q, h) for a native histogram,
// as Prometheus 2.x computes it: walk the buckets from the most negative to
// the most positive (zero bucket in between) until the cumulative count
// reaches q·count, then interpolate linearly inside that bucket. A zero
// bucket that is hit while the histogram has buckets on only one side is
// taken to span from zero to the threshold. q < 0 gives -Inf, q > 1 +Inf;
// an empty or classic-only histogram, or q NaN, gives NaN. When the rank is
// not reached (observations of NaN), the upper bound of the last bucket is
// returned.
func NativeQuantile(h *dto.Histogram, q float64) float64 {
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	}
	n, err := decodeNative(h)
	if err != nil || n.count == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	rank := q * n.count
	var (
		b     nativeBucket
		count float64
	)
	for _, b = range n.buckets() {
		count += b.count
		if count >= rank {
			break
		}
	}
	if b.lower < 0 && b.upper > 0 {
		switch {
		case len(n.negative) == 0 && len(n.positive) > 0:
			b.lower = 0
		case len(n.positive) == 0 && len(n.negative) > 0:
			b.upper = 0
		}
	}
	count = min(count, n.count)
	if count < rank {
		return b.upper
	}
	rank -= count - b.count
	return b.lower + (b.upper-b.lower)*(rank/b.count)
}

// MergeNative adds native histograms bucket by bucket, as PromQL's sum does:
// histograms of finer schemas are first reduced to the coarsest schema
// present, and the widest zero bucket absorbs the buckets of the others that
// overlap it. Nil histograms are skipped; a histogram without native buckets
// is an error. The result is integer-encoded when every input is, and
// float-encoded otherwise.
func MergeNative(hs ...*dto.Histogram) (*dto.Histogram, error) {
	var ns []*native
	floats := false
	for _, h := range hs {
		if h == nil {
			continue
		}
		n, err := decodeNative(h)
		if err != nil {
			return nil, err
		}
		floats = floats || h.SampleCountFloat != nil
		ns = append(ns, n)
	}
	if len(ns) == 0 {
		return nil, errors.New("no histogram to merge")
	}
	sum := newNative(maxNativeSchema)
	for _, n := range ns {
		sum.schema = min(sum.schema, n.schema)
		sum.zeroThreshold = max(sum.zeroThreshold, n.zeroThreshold)
	}
	for _, n := range ns {
		n.reduce(sum.schema)
		n.widenZero(sum.zeroThreshold)
		sum.zeroThreshold = max(sum.zeroThreshold, n.zeroThreshold)
	}
	for _, n := range ns {
		n.widenZero(sum.zeroThreshold)
		sum.count += n.count
		sum.sum += n.sum
		sum.zeroCount += n.zeroCount
		for i, c := range n.positive {
			sum.positive[i] += c
		}
		for i, c := range n.negative {
			sum.negative[i] += c
		}
	}
	return sum.encode(floats), nil
}

// native is a decoded native histogram: bucket counts by index. Positive
// bucket i covers (2^((i-1)·2^-schema), 2^(i·2^-schema)]; negative bucket i
// is its mirror image below zero.
type native struct {
	schema        int32
	zeroThreshold float64
	zeroCount     float64
	count         float64
	sum           float64
	positive      map[int]float64
	negative      map[int]float64
}

func newNative(schema int32) *native {
	return &native{schema: schema, positive: map[int]float64{}, negative: map[int]float64{}}
}

// isNative reports whether h carries native buckets. client_golang marks an
// empty native histogram with a zero-length span.
func isNative(h *dto.Histogram) bool {
	return h != nil && (h.Schema != nil || len(h.PositiveSpan) > 0 || len(h.NegativeSpan) > 0 || h.ZeroThreshold != nil)
}

func decodeNative(h *dto.Histogram) (*native, error) {
	if !isNative(h) {
		return nil, errors.New("histogram has no native buckets")
	}
	s := h.GetSchema()
	if s < minNativeSchema || s > maxNativeSchema {
		return nil, errors.New("native histogram schema out of range")
	}
	n := newNative(s)
	n.zeroThreshold = h.GetZeroThreshold()
	n.sum = h.GetSampleSum()
	if h.SampleCountFloat != nil {
		n.count = h.GetSampleCountFloat()
		n.zeroCount = h.GetZeroCountFloat()
	} else {
		n.count = float64(h.GetSampleCount())
		n.zeroCount = float64(h.GetZeroCount())
	}
	if err := decodeBuckets(n.positive, h.PositiveSpan, h.PositiveDelta, h.PositiveCount); err != nil {
		return nil, err
	}
	if err := decodeBuckets(n.negative, h.NegativeSpan, h.NegativeDelta, h.NegativeCount); err != nil {
		return nil, err
	}
	return n, nil
}

// decodeBuckets reads spans (the first offset absolute, the others gaps
// after the previous span) and either delta-encoded integer counts or
// absolute float counts into into.
func decodeBuckets(into map[int]float64, spans []*dto.BucketSpan, deltas []int64, counts []float64) error {
	var want int
	for _, s := range spans {
		want += int(s.GetLength())
	}
	if len(deltas) > 0 && len(counts) > 0 || want != len(deltas)+len(counts) {
		return errors.New("native histogram spans do not match its buckets")
	}
	var (
		idx, pos int
		abs      int64
	)
	for _, s := range spans {
		idx += int(s.GetOffset())
		for range s.GetLength() {
			var c float64
			if len(deltas) > 0 {
				abs += deltas[pos]
				c = float64(abs)
			} else {
				c = counts[pos]
			}
			if c != 0 {
				into[idx] += c
			}
			pos++
			idx++
		}
	}
	return nil
}

// reduce merges buckets into those of a coarser schema.
func (n *native) reduce(schema int32) {
	if schema >= n.schema {
		return
	}
	shift := n.schema - schema
	for _, m := range []map[int]float64{n.positive, n.negative} {
		old := make(map[int]float64, len(m))
		for i, c := range m {
			old[i] = c
			delete(m, i)
		}
		for i, c := range old {
			m[((i-1)>>shift)+1] += c
		}
	}
	n.schema = schema
}

// widenZero raises the zero threshold to at least t, moving every bucket
// whose lower bound lies below the threshold into the zero bucket and, when
// such a bucket reaches past it, raising the threshold to its upper bound.
func (n *native) widenZero(t float64) {
	if t <= n.zeroThreshold && !n.overlapsZero() {
		return
	}
	n.zeroThreshold = max(n.zeroThreshold, t)
	for moved := true; moved; {
		moved = false
		for _, m := range []map[int]float64{n.positive, n.negative} {
			for i, c := range m {
				lo, hi := bucketBounds(n.schema, i)
				if lo >= n.zeroThreshold {
					continue
				}
				n.zeroCount += c
				delete(m, i)
				if hi > n.zeroThreshold {
					n.zeroThreshold = hi
					moved = true
				}
			}
		}
	}
}

func (n *native) overlapsZero() bool {
	for _, m := range []map[int]float64{n.positive, n.negative} {
		for i := range m {
			if lo, _ := bucketBounds(n.schema, i); lo < n.zeroThreshold {
				return true
			}
		}
	}
	return false
}

// bucketBounds returns the absolute bounds of bucket i: (lower, upper].
func bucketBounds(schema int32, i int) (lower, upper float64) {
	return bucketUpper(schema, i-1), bucketUpper(schema, i)
}

func bucketUpper(schema int32, i int) float64 {
	if schema <= 0 {
		return math.Ldexp(1, i<<(-schema))
	}
	per := 1 << schema
	exp, frac := i/per, i%per
	if frac < 0 {
		exp, frac = exp-1, frac+per
	}
	return math.Ldexp(math.Exp2(float64(frac)/float64(per)), exp)
}

type nativeBucket struct {
	lower, upper, count float64
}

// buckets lists the non-empty buckets in ascending order of value: negative
// buckets, the zero bucket, positive buckets.
func (n *native) buckets() []nativeBucket {
	var out []nativeBucket
	for _, i := range sortedIndexes(n.negative, true) {
		lo, hi := bucketBounds(n.schema, i)
		out = append(out, nativeBucket{lower: -hi, upper: -lo, count: n.negative[i]})
	}
	if n.zeroCount > 0 {
		out = append(out, nativeBucket{lower: -n.zeroThreshold, upper: n.zeroThreshold, count: n.zeroCount})
	}
	for _, i := range sortedIndexes(n.positive, false) {
		lo, hi := bucketBounds(n.schema, i)
		out = append(out, nativeBucket{lower: lo, upper: hi, count: n.positive[i]})
	}
	return out
}

func sortedIndexes(m map[int]float64, descending bool) []int {
	idx := make([]int, 0, len(m))
	for i, c := range m {
		if c != 0 {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	if descending {
		for l, r := 0, len(idx)-1; l < r; l, r = l+1, r-1 {
			idx[l], idx[r] = idx[r], idx[l]
		}
	}
	return idx
}

func (n *native) encode(floats bool) *dto.Histogram {
	h := &dto.Histogram{
		Schema:        proto.Int32(n.schema),
		ZeroThreshold: proto.Float64(n.zeroThreshold),
		SampleSum:     proto.Float64(n.sum),
	}
	if floats {
		h.SampleCountFloat = proto.Float64(n.count)
		h.ZeroCountFloat = proto.Float64(n.zeroCount)
	} else {
		h.SampleCount = proto.Uint64(uint64(n.count))
		h.ZeroCount = proto.Uint64(uint64(n.zeroCount))
	}
	h.PositiveSpan, h.PositiveDelta, h.PositiveCount = encodeBuckets(n.positive, floats)
	h.NegativeSpan, h.NegativeDelta, h.NegativeCount = encodeBuckets(n.negative, floats)
	if len(h.PositiveSpan) == 0 && len(h.NegativeSpan) == 0 {
		h.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	return h
}

func encodeBuckets(m map[int]float64, floats bool) ([]*dto.BucketSpan, []int64, []float64) {
	var (
		spans  []*dto.BucketSpan
		deltas []int64
		counts []float64
		prev   int64
		next   int
	)
	for k, i := range sortedIndexes(m, false) {
		if k == 0 || i != next {
			offset := i
			if k > 0 {
				offset = i - next
			}
			spans = append(spans, &dto.BucketSpan{Offset: proto.Int32(int32(offset)), Length: proto.Uint32(0)})
		}
		s := spans[len(spans)-1]
		s.Length = proto.Uint32(s.GetLength() + 1)
		if floats {
			counts = append(counts, m[i])
		} else {
			c := int64(m[i])
			deltas = append(deltas, c-prev)
			prev = c
		}
		next = i + 1
	}
	return spans, deltas, counts
}
