package classify

import (
	"bytes"
	"testing"

	"github.com/kestrelops/tandem/exporter"
)

const maxFuzzInput = 1 << 16

func FuzzParsePrompt(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`))
	f.Add([]byte(`{"prompt":["a","b"]}`))
	f.Add([]byte(`{"instructions":"x","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxFuzzInput {
			return
		}
		p, err := ParsePrompt(body)
		if err != nil {
			if p.Text != nil || p.ConversationKey != nil {
				t.Fatalf("error %v with a non-empty prompt", err)
			}
			return
		}
		if !bytes.HasPrefix(p.Text, p.ConversationKey) {
			t.Fatalf("ConversationKey %q is not a prefix of Text %q", p.ConversationKey, p.Text)
		}
		items := bytes.Count(p.Text, []byte{markItem}) + bytes.Count(p.Text, []byte{markTyped})
		if contents := bytes.Count(p.Text, []byte{markContent}); contents != items {
			t.Fatalf("%d content markers for %d items: content leaked a marker byte into %q", contents, items, p.Text)
		}
		again, err := ParsePrompt(body)
		if err != nil || !bytes.Equal(again.Text, p.Text) {
			t.Fatalf("second parse gave %q, %v; first %q", again.Text, err, p.Text)
		}

		opts := DefaultOptions()
		ix := NewIndex(opts, nil)
		_, first := ix.Classify(p.Text)
		class, second := ix.Classify(p.Text)
		checkReuse(t, first, second)
		if len(p.Text) > 0 && second != 1 {
			t.Fatalf("the same prompt twice: reuse %v, want 1", second)
		}
		if len(p.Text) >= opts.MinBytes && class != exporter.ClassRepeatedPrefix {
			t.Fatalf("the same %d-byte prompt twice: class %q, want repeated_prefix", len(p.Text), class)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte("shared prefix shared prefix shared prefix and a"), []byte("shared prefix shared prefix shared prefix and b"))
	f.Add([]byte(""), []byte("x"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if len(a) > maxFuzzInput || len(b) > maxFuzzInput {
			return
		}
		opts := Options{ChunkBytes: 8, MaxEntries: 16, MinFraction: 0.5, MinBytes: 16}
		ix := NewIndex(opts, nil)
		for _, p := range [][]byte{a, b, a, b} {
			_, reuse := ix.Classify(p)
			checkReuse(t, reuse)
			if n := ix.Len(); n > opts.MaxEntries {
				t.Fatalf("Len = %d > MaxEntries %d", n, opts.MaxEntries)
			}
			checkList(t, ix)
		}

		ix = NewIndex(opts, nil)
		ix.Classify(a)
		class, reuse := ix.Classify(a)
		kept := min(len(a), opts.MaxEntries*opts.ChunkBytes)
		if len(a) > 0 && reusedBytes(reuse, a) != kept {
			t.Fatalf("the same %d-byte prompt twice: reused %d bytes, want %d", len(a), reusedBytes(reuse, a), kept)
		}
		wantRepeated := kept >= opts.MinBytes && float64(kept) >= opts.MinFraction*float64(len(a))
		if (class == exporter.ClassRepeatedPrefix) != wantRepeated {
			t.Fatalf("the same %d-byte prompt twice: class %q, reuse %v", len(a), class, reuse)
		}
	})
}

func checkReuse(t *testing.T, reuse ...float64) {
	t.Helper()
	for _, r := range reuse {
		if !(r >= 0 && r <= 1) {
			t.Fatalf("reuse %v outside [0, 1]", r)
		}
	}
}

// checkList verifies that the recency list holds every node once, in order
// of decreasing last-seen time, and that the map points at each node.
func checkList(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.slots) != len(ix.nodes) {
		t.Fatalf("%d map entries for %d nodes", len(ix.slots), len(ix.nodes))
	}
	count, prev := 0, none
	for i := ix.head; i != none; i = ix.nodes[i].next {
		n := ix.nodes[i]
		if n.prev != prev || ix.slots[n.key] != i {
			t.Fatalf("node %d: prev %d (want %d), map slot %d", i, n.prev, prev, ix.slots[n.key])
		}
		if prev != none && n.seen > ix.nodes[prev].seen {
			t.Fatalf("node %d seen after its predecessor", i)
		}
		if count++; count > len(ix.nodes) {
			t.Fatal("recency list has a cycle")
		}
		prev = i
	}
	if count != len(ix.nodes) || ix.tail != prev {
		t.Fatalf("recency list reaches %d of %d nodes, ends at %d, tail %d", count, len(ix.nodes), prev, ix.tail)
	}
}
