package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// byteBudget bounds the bytes tandem holds for measurement across the
// process (TANDEM_MAX_BUFFERED_BYTES). Holders take before they hold and
// give back when they let go; a take that does not fit is refused, never
// waited for, so the production path never blocks on it.
type byteBudget struct {
	limit int64
	used  atomic.Int64
	gauge prometheus.Gauge // may be nil
}

func newByteBudget(limit int64, gauge prometheus.Gauge) *byteBudget {
	return &byteBudget{limit: limit, gauge: gauge}
}

// Take reserves n bytes and reports whether they fit.
func (b *byteBudget) Take(n int64) bool {
	for {
		used := b.used.Load()
		if n > b.limit-used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			if b.gauge != nil {
				b.gauge.Add(float64(n))
			}
			return true
		}
	}
}

// Give returns n bytes taken earlier.
func (b *byteBudget) Give(n int64) {
	b.used.Add(-n)
	if b.gauge != nil {
		b.gauge.Sub(float64(n))
	}
}

// held is n bytes of a budget shared by several owners: the bytes go back
// when the last owner is done.
type held struct {
	budget *byteBudget
	n      int64
	owners atomic.Int32
}

func (b *byteBudget) hold(n int64, owners int32) *held {
	h := &held{budget: b, n: n}
	h.owners.Store(owners)
	return h
}

func (h *held) done() {
	if h.owners.Add(-1) == 0 {
		h.budget.Give(h.n)
	}
}

// rateBudget is a token bucket of bytes per second with a burst of one
// second. It never waits: a read beyond the rate is refused, so a shadow that
// outruns it is cut rather than read late (which would falsify its timings).
type rateBudget struct {
	mu     sync.Mutex
	rate   float64 // bytes per second, also the bucket's size
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newRateBudget(bytesPerSecond int64, now func() time.Time) *rateBudget {
	return &rateBudget{rate: float64(bytesPerSecond), tokens: float64(bytesPerSecond), last: now(), now: now}
}

// take spends n bytes and reports whether the bucket held them.
func (r *rateBudget) take(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.tokens = min(r.rate, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	r.last = now
	if float64(n) > r.tokens {
		return false
	}
	r.tokens -= float64(n)
	return true
}
