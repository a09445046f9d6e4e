package classify

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// Options configures an Index.
type Options struct {
	// ChunkBytes is the size of the prefix blocks the index remembers, the
	// analogue of an engine's KV-cache block. It must be positive.
	ChunkBytes int
	// MaxEntries bounds the number of remembered blocks. When the index is
	// full, the least recently seen block is forgotten; among the blocks of
	// one prompt the longer prefixes go first. It must be positive.
	MaxEntries int
	// TTL forgets a block not seen for this long. Zero keeps blocks until
	// MaxEntries pushes them out.
	TTL time.Duration
	// MinFraction is the reused share of the prompt's bytes, in [0, 1], from
	// which a prompt is a repeated prefix.
	MinFraction float64
	// MinBytes is the number of reused bytes from which a prompt is a
	// repeated prefix. Both MinFraction and MinBytes must be reached.
	MinBytes int
}

// DefaultOptions returns 64-byte chunks, 100000 entries, a 10 minute TTL, and
// repeated_prefix from half the prompt and at least 256 bytes reused.
func DefaultOptions() Options {
	return Options{
		ChunkBytes:  64,
		MaxEntries:  100000,
		TTL:         10 * time.Minute,
		MinFraction: 0.5,
		MinBytes:    256,
	}
}

// Validate reports the first field of o that NewIndex cannot accept.
func (o Options) Validate() error {
	switch {
	case o.ChunkBytes < 1:
		return fmt.Errorf("classify: ChunkBytes must be positive, got %d", o.ChunkBytes)
	case o.MaxEntries < 1 || o.MaxEntries > math.MaxInt32:
		return fmt.Errorf("classify: MaxEntries must be in [1, %d], got %d", math.MaxInt32, o.MaxEntries)
	case o.TTL < 0:
		return fmt.Errorf("classify: TTL must not be negative, got %s", o.TTL)
	case !(o.MinFraction >= 0 && o.MinFraction <= 1):
		return fmt.Errorf("classify: MinFraction must be in [0, 1], got %v", o.MinFraction)
	case o.MinBytes < 0:
		return fmt.Errorf("classify: MinBytes must not be negative, got %d", o.MinBytes)
	}
	return nil
}

// Index remembers the prefixes of recently classified prompts. Each block of
// ChunkBytes bytes is keyed by a hash chained over all blocks before it, so a
// key stands for a whole prefix. Its methods are safe for concurrent use; the
// cost of Classify is linear in the prompt's length.
type Index struct {
	opts  Options
	now   func() time.Time
	epoch time.Time
	seed  maphash.Seed

	mu    sync.Mutex
	slots map[uint64]int32
	nodes []node
	head  int32
	tail  int32
}

// node is one remembered block in a doubly linked list ordered from the most
// (head) to the least (tail) recently seen.
type node struct {
	key        uint64
	seen       time.Duration
	prev, next int32
}

const none int32 = -1

// NewIndex returns an empty index reading time from now (time.Now when nil).
// It panics when opts.Validate fails.
func NewIndex(opts Options, now func() time.Time) *Index {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if now == nil {
		now = time.Now
	}
	return &Index{
		opts:  opts,
		now:   now,
		epoch: now(),
		seed:  maphash.MakeSeed(),
		slots: make(map[uint64]int32),
		head:  none,
		tail:  none,
	}
}

// Classify returns the class of prompt and the reuse fraction, then records
// prompt in the index. The reuse fraction is the length of the longest prefix
// of prompt seen within TTL, counted in whole blocks or the whole prompt,
// divided by len(prompt); it is 0 for an empty prompt.
func (ix *Index) Classify(prompt []byte) (class string, reuse float64) {
	if len(prompt) == 0 {
		return exporter.ClassFresh, 0
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	now := ix.now().Sub(ix.epoch)
	ix.expire(now)

	var h maphash.Hash
	h.SetSeed(ix.seed)
	var chain [8]byte
	anchor := none
	reused := 0
	matching := true
	for start := 0; start < len(prompt); start += ix.opts.ChunkBytes {
		end := min(start+ix.opts.ChunkBytes, len(prompt))
		h.Reset()
		h.Write(chain[:])
		h.Write(prompt[start:end])
		key := h.Sum64()
		binary.LittleEndian.PutUint64(chain[:], key)

		i, seen := ix.slots[key]
		if seen && matching {
			reused = end
		} else {
			matching = false
		}
		if seen {
			ix.touch(i, anchor, now)
		} else if i, seen = ix.insert(key, anchor, now); !seen {
			break
		}
		anchor = i
	}

	return ix.opts.class(reused, len(prompt))
}

// class is the class of a prompt of n bytes whose first reused bytes were
// seen before, and its reuse fraction.
func (o Options) class(reused, n int) (string, float64) {
	if n == 0 {
		return exporter.ClassFresh, 0
	}
	reuse := float64(reused) / float64(n)
	if reuse >= o.MinFraction && reused >= o.MinBytes {
		return exporter.ClassRepeatedPrefix, reuse
	}
	return exporter.ClassFresh, reuse
}

// Len returns the number of blocks remembered and not expired.
func (ix *Index) Len() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.expire(ix.now().Sub(ix.epoch))
	return len(ix.nodes)
}

func (ix *Index) expire(now time.Duration) {
	if ix.opts.TTL <= 0 {
		return
	}
	for ix.tail != none && now-ix.nodes[ix.tail].seen >= ix.opts.TTL {
		ix.remove(ix.tail)
	}
}

// touch marks node i seen at now and moves it right behind anchor (to the
// head when anchor is none).
func (ix *Index) touch(i, anchor int32, now time.Duration) {
	ix.nodes[i].seen = now
	if i == anchor {
		return
	}
	ix.unlink(i)
	ix.linkAfter(i, anchor)
}

// insert adds key right behind anchor, reusing the least recently seen slot
// when the index is full. It reports false, and adds nothing, when that slot
// is anchor itself: the current prompt already fills the index.
func (ix *Index) insert(key uint64, anchor int32, now time.Duration) (int32, bool) {
	var i int32
	if len(ix.nodes) < ix.opts.MaxEntries {
		i = int32(len(ix.nodes))
		ix.nodes = append(ix.nodes, node{})
	} else {
		i = ix.tail
		if i == anchor {
			return none, false
		}
		ix.unlink(i)
		delete(ix.slots, ix.nodes[i].key)
	}
	ix.nodes[i] = node{key: key, seen: now, prev: none, next: none}
	ix.slots[key] = i
	ix.linkAfter(i, anchor)
	return i, true
}

// remove deletes node i and moves the last node into its slot, keeping
// nodes dense.
func (ix *Index) remove(i int32) {
	ix.unlink(i)
	delete(ix.slots, ix.nodes[i].key)
	last := int32(len(ix.nodes) - 1)
	if i != last {
		moved := ix.nodes[last]
		ix.nodes[i] = moved
		ix.slots[moved.key] = i
		if moved.prev != none {
			ix.nodes[moved.prev].next = i
		} else {
			ix.head = i
		}
		if moved.next != none {
			ix.nodes[moved.next].prev = i
		} else {
			ix.tail = i
		}
	}
	ix.nodes = ix.nodes[:last]
}

func (ix *Index) unlink(i int32) {
	n := &ix.nodes[i]
	if n.prev != none {
		ix.nodes[n.prev].next = n.next
	} else {
		ix.head = n.next
	}
	if n.next != none {
		ix.nodes[n.next].prev = n.prev
	} else {
		ix.tail = n.prev
	}
	n.prev, n.next = none, none
}

// linkAfter links the unlinked node i behind anchor, or at the head when
// anchor is none.
func (ix *Index) linkAfter(i, anchor int32) {
	n := &ix.nodes[i]
	if anchor == none {
		n.next = ix.head
		if ix.head != none {
			ix.nodes[ix.head].prev = i
		}
		ix.head = i
		if ix.tail == none {
			ix.tail = i
		}
		return
	}
	n.prev = anchor
	n.next = ix.nodes[anchor].next
	if n.next != none {
		ix.nodes[n.next].prev = i
	} else {
		ix.tail = i
	}
	ix.nodes[anchor].next = i
}
