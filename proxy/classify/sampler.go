package classify

import (
	"math/rand/v2"
	"sync"
)

// Sampler decides which requests are mirrored.
type Sampler struct {
	rate           float64
	byConversation bool

	mu  sync.Mutex
	rnd func() float64
}

// NewConversationSampler mirrors whole conversations: a request is sampled
// when a hash of its conversation key, mapped to [0, 1), is below rate. The
// decision depends on the key and rate only, so every turn of a conversation
// gets the same one, on every tandem replica, and raising the rate only adds
// conversations.
func NewConversationSampler(rate float64) *Sampler {
	return &Sampler{rate: rate, byConversation: true}
}

// NewRequestSampler mirrors each request independently with probability
// rate, drawing from rnd, which returns values in [0, 1). Calls to rnd are
// serialized, so a seeded *rand.Rand's Float64 may be passed; nil means the
// global math/rand/v2 source.
func NewRequestSampler(rate float64, rnd func() float64) *Sampler {
	if rnd == nil {
		rnd = rand.Float64
	}
	return &Sampler{rate: rate, rnd: rnd}
}

// Sampled decides for one request; headerKey is the sample-key header value
// ("" when absent). A conversation sampler uses headerKey, when not empty, in place of
// p.ConversationKey. Sampled is safe for concurrent use.
func (s *Sampler) Sampled(headerKey string, p Prompt) bool {
	switch {
	case s.rate <= 0:
		return false
	case s.rate >= 1:
		return true
	case !s.byConversation:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rnd() < s.rate
	case headerKey != "":
		return keyFraction(headerKey) < s.rate
	default:
		return keyFraction(p.ConversationKey) < s.rate
	}
}

// keyFraction maps key to [0, 1) with FNV-1a 64 followed by the MurmurHash3
// finalizer, which spreads FNV's weakly mixed high bits. It is part of the
// contract between tandem replicas and must not change.
func keyFraction[K string | []byte](key K) float64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return float64(h>>11) / (1 << 53)
}

// ClassFor applies the class header allowlist: it returns header when allowed, else classified.
func ClassFor(header string, allowed map[string]bool, classified string) string {
	if header != "" && allowed[header] {
		return header
	}
	return classified
}
