package sim

import (
	"container/list"
	"context"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sync"
	"time"
)

// sequence is one request inside the engine.
type sequence struct {
	ctx          context.Context
	promptTokens int
	blocks       []uint64
	outputTokens int
	// tokens receives one value per generated token and is closed after the
	// last one. Its buffer holds every token, so the scheduler never waits
	// for a slow reader.
	tokens chan struct{}
	// cachedTokens is set before the first token is sent.
	cachedTokens int
	readyAt      time.Time
	emitted      int
}

func newSequence(ctx context.Context, prompt []string, outputTokens, blockSize int) *sequence {
	return &sequence{
		ctx:          ctx,
		promptTokens: len(prompt),
		blocks:       blockHashes(prompt, blockSize),
		outputTokens: outputTokens,
		tokens:       make(chan struct{}, outputTokens),
	}
}

func (s *sequence) canceled() bool { return s.ctx.Err() != nil }

// engine is the continuous-batching scheduler. A request waits, first in
// first out, until fewer than MaxNumSeqs sequences are admitted. On
// admission its prefill starts at once and runs on its own, in parallel with
// decode steps and other prefills (as chunked prefill overlapping perfectly
// would): it lasts PrefillOverhead + PrefillPerToken × uncached prompt
// tokens. One goroutine runs decode steps back to back while any sequence
// is prefilled; a step lasts StepBase + StepPerSeq × sequences in it and
// gives each of them one token at its end. A sequence joins the first step
// that starts after its prefill ends, so its first token arrives after its
// queue wait, its prefill, the rest of the step in progress and one step.
type engine struct {
	p     Params
	cache *prefixCache

	mu      sync.Mutex
	waiting []*sequence

	// Owned by the scheduler goroutine.
	admitted int
	prefill  []*sequence

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newEngine(p Params) *engine {
	e := &engine{
		p:     p,
		cache: newPrefixCache(p.PrefixCacheBlocks),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go e.run()
	return e
}

// submit queues s.
func (e *engine) submit(s *sequence) {
	e.mu.Lock()
	e.waiting = append(e.waiting, s)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *engine) close() {
	close(e.stop)
	<-e.done
}

func (e *engine) run() {
	defer close(e.done)
	var batch []*sequence
	for {
		e.admitted -= len(batch)
		batch = slices.DeleteFunc(batch, (*sequence).canceled)
		e.admitted += len(batch)
		e.admit()
		batch = append(batch, e.ready()...)
		if len(batch) == 0 {
			if !e.waitUntil(e.nextReady(), true) {
				return
			}
			continue
		}
		step := e.p.StepBase + time.Duration(len(batch))*e.p.StepPerSeq
		if !e.waitUntil(time.Now().Add(step), false) {
			return
		}
		e.admitted -= len(batch)
		batch = slices.DeleteFunc(batch, emit)
		e.admitted += len(batch)
	}
}

// admit starts the prefill of waiting sequences while there is room, looking
// up and filling the prefix cache for them.
func (e *engine) admit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waiting = slices.DeleteFunc(e.waiting, (*sequence).canceled)
	now := time.Now()
	for len(e.waiting) > 0 && e.admitted < e.p.MaxNumSeqs {
		s := e.waiting[0]
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		s.cachedTokens = e.cache.match(s.blocks) * e.p.BlockSize
		e.cache.insert(s.blocks)
		s.readyAt = now.Add(e.p.PrefillOverhead + time.Duration(s.promptTokens-s.cachedTokens)*e.p.PrefillPerToken)
		e.prefill = append(e.prefill, s)
		e.admitted++
	}
}

// ready removes and returns the sequences whose prefill has ended, and
// forgets canceled ones.
func (e *engine) ready() []*sequence {
	now := time.Now()
	var out []*sequence
	e.prefill = slices.DeleteFunc(e.prefill, func(s *sequence) bool {
		switch {
		case s.canceled():
			e.admitted--
			return true
		case !s.readyAt.After(now):
			out = append(out, s)
			return true
		}
		return false
	})
	return out
}

// nextReady is when the next prefill ends; zero when none runs.
func (e *engine) nextReady() time.Time {
	var t time.Time
	for _, s := range e.prefill {
		if t.IsZero() || s.readyAt.Before(t) {
			t = s.readyAt
		}
	}
	return t
}

// waitUntil sleeps until t (forever when t is zero), admitting sequences
// as they arrive, and returning early after admitting when onArrival is set.
// It reports false when the engine stops.
func (e *engine) waitUntil(t time.Time, onArrival bool) bool {
	var timeout <-chan time.Time
	if !t.IsZero() {
		timer := time.NewTimer(time.Until(t))
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-timeout:
			return true
		case <-e.wake:
			e.admit()
			if onArrival {
				return true
			}
		case <-e.stop:
			return false
		}
	}
}

// emit hands s its next token and reports whether s is finished or gone.
func emit(s *sequence) bool {
	if s.canceled() {
		return true
	}
	s.tokens <- struct{}{}
	s.emitted++
	if s.emitted == s.outputTokens {
		close(s.tokens)
		return true
	}
	return false
}

// blockHashes returns the chained hashes of the full blocks of prompt,
// leaving out the last token, which an engine always computes: block i's
// hash covers block i and, through the chain, everything before it.
func blockHashes(prompt []string, blockSize int) []uint64 {
	if blockSize <= 0 || len(prompt) < 2 {
		return nil
	}
	n := (len(prompt) - 1) / blockSize
	hashes := make([]uint64, n)
	var prev uint64
	for i := range n {
		h := fnv.New64a()
		h.Write(binary.LittleEndian.AppendUint64(nil, prev))
		for _, tok := range prompt[i*blockSize : (i+1)*blockSize] {
			h.Write([]byte(tok))
			h.Write([]byte{0})
		}
		prev = h.Sum64()
		hashes[i] = prev
	}
	return hashes
}

// prefixCache holds block hashes, evicting the least recently used block
// when full. A nil *prefixCache is a disabled cache.
type prefixCache struct {
	capacity int
	lru      *list.List
	blocks   map[uint64]*list.Element
}

func newPrefixCache(capacity int) *prefixCache {
	if capacity <= 0 {
		return nil
	}
	return &prefixCache{capacity: capacity, lru: list.New(), blocks: make(map[uint64]*list.Element)}
}

// match returns how many leading blocks of hashes are cached, marking them
// recently used.
func (c *prefixCache) match(hashes []uint64) int {
	if c == nil {
		return 0
	}
	for i, h := range hashes {
		el, ok := c.blocks[h]
		if !ok {
			return i
		}
		c.lru.MoveToFront(el)
	}
	return len(hashes)
}

func (c *prefixCache) insert(hashes []uint64) {
	if c == nil {
		return
	}
	for _, h := range hashes {
		if el, ok := c.blocks[h]; ok {
			c.lru.MoveToFront(el)
			continue
		}
		c.blocks[h] = c.lru.PushFront(h)
		if c.lru.Len() > c.capacity {
			oldest := c.lru.Back()
			c.lru.Remove(oldest)
			delete(c.blocks, oldest.Value.(uint64))
		}
	}
}
