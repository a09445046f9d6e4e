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

// engine is the continuous-batching scheduler. One goroutine runs steps; a
// step first prefills every sequence admitted into it, then runs one decode
// pass in which every running sequence emits one token. A step lasts
// sum(prefill of admitted) + StepBase + StepPerSeq × running, so a prefill
// delays the step for the whole batch, as without chunked prefill.
type engine struct {
	p     Params
	cache *prefixCache

	mu      sync.Mutex
	waiting []*sequence

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

// submit queues s; it waits, first in first out, until a slot is free.
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
	var running []*sequence
	for {
		running = slices.DeleteFunc(running, (*sequence).canceled)
		var prefill time.Duration
		running, prefill = e.admit(running)
		if len(running) == 0 {
			select {
			case <-e.wake:
				continue
			case <-e.stop:
				return
			}
		}
		step := prefill + e.p.StepBase + time.Duration(len(running))*e.p.StepPerSeq
		if !e.sleep(step) {
			return
		}
		running = slices.DeleteFunc(running, emit)
	}
}

// admit moves waiting sequences into the batch while it has room, looks up
// and fills the prefix cache for them, and returns their prefill time.
func (e *engine) admit(running []*sequence) ([]*sequence, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waiting = slices.DeleteFunc(e.waiting, (*sequence).canceled)
	var prefill time.Duration
	for len(e.waiting) > 0 && len(running) < e.p.MaxNumSeqs {
		s := e.waiting[0]
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		s.cachedTokens = e.cache.match(s.blocks) * e.p.BlockSize
		e.cache.insert(s.blocks)
		prefill += e.p.PrefillOverhead + time.Duration(s.promptTokens-s.cachedTokens)*e.p.PrefillPerToken
		running = append(running, s)
	}
	return running, prefill
}

func (e *engine) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.stop:
		return false
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
