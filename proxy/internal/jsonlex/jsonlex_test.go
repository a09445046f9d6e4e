package jsonlex

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestPlainWord checks the eight-bytes-at-a-time test against the byte table,
// for every byte at every position and for random words.
func TestPlainWord(t *testing.T) {
	check := func(word [8]byte) {
		want := true
		for _, c := range word {
			want = want && plainStringByte[c]
		}
		if got := plainWord(binary.LittleEndian.Uint64(word[:])); got != want {
			t.Fatalf("plainWord(%q) = %v, want %v", word, got, want)
		}
	}
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff} {
				word := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				word[pos] = byte(c)
				check(word)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], rng.Uint64())
		check(word)
	}
}
