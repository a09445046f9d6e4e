package classify

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/internal/redistest"
)

func newShared(t testing.TB, url string, fallbacks *atomic.Int64) *Redis {
	t.Helper()
	// A generous timeout: a loaded machine under -race can be slower than
	// the default 50 ms on loopback, and a timed-out call is a fallback.
	r, err := NewRedis(RedisOptions{URL: url, Timeout: time.Second, RetryAfter: 100 * time.Millisecond,
		PoolSize: 4, OnFallback: func() { fallbacks.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestSharedIndexAcrossReplicas: a conversation's second turn, classified
// by another replica, is a repeated prefix.
func TestSharedIndexAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var fallbacks atomic.Int64
	one := newShared(t, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
	two := newShared(t, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
	mirror := newShared(t, srv.URL(), &fallbacks).Index("mirror", NewIndex(DefaultOptions(), nil))

	turn1 := []byte(strings.Repeat("system prompt. ", 40) + "first question")
	turn2 := append(append([]byte{}, turn1...), " answer, second question"...)
	if class, reuse := one.Classify(turn1); class != exporter.ClassFresh || reuse != 0 {
		t.Fatalf("turn 1 on replica one: %s %v", class, reuse)
	}
	class, reuse := two.Classify(turn2)
	if class != exporter.ClassRepeatedPrefix || reuse < 0.9 {
		t.Fatalf("turn 2 on replica two: %s %v, want repeated_prefix", class, reuse)
	}
	if class, reuse := two.Classify(turn2); class != exporter.ClassRepeatedPrefix || reuse != 1 {
		t.Fatalf("turn 2 again: %s %v, want fully reused", class, reuse)
	}
	if class, _ := mirror.Classify(turn2); class != exporter.ClassFresh {
		t.Fatalf("the mirror index shares keys with production: %s", class)
	}
	if n := fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks with Redis up", n)
	}
}

// TestSharedIndexMatchesLocal: on one replica, the shared index labels a
// trace as the local index does.
func TestSharedIndexMatchesLocal(t *testing.T) {
	srv := redistest.Start(t)
	var fallbacks atomic.Int64
	shared := newShared(t, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
	local := NewIndex(DefaultOptions(), nil)
	r := rand.New(rand.NewPCG(1, 2))
	system := randomText(r, 600)
	convs := make([]string, 20)
	for i := range 400 {
		c := r.IntN(len(convs))
		if convs[c] == "" || r.IntN(8) == 0 {
			convs[c] = system[:r.IntN(len(system))]
		}
		convs[c] += randomText(r, 10+r.IntN(300))
		prompt := []byte(convs[c])
		wantClass, wantReuse := local.Classify(prompt)
		class, reuse := shared.Classify(prompt)
		if class != wantClass || reuse != wantReuse {
			t.Fatalf("prompt %d: shared %s %v, local %s %v", i, class, reuse, wantClass, wantReuse)
		}
	}
	if n := fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks with Redis up", n)
	}
}

// TestSharedIndexFallsBackAndReturns: with Redis gone the local index
// answers at once, one request per RetryAfter tries Redis, and the shared
// index is used again once Redis is back.
func TestSharedIndexFallsBackAndReturns(t *testing.T) {
	srv := redistest.Start(t)
	var fallbacks atomic.Int64
	conn := newShared(t, srv.URL(), &fallbacks)
	one := conn.Index("production", NewIndex(DefaultOptions(), nil))
	two := newShared(t, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
	prompt := []byte(strings.Repeat("x", 1000))
	one.Classify(prompt)
	srv.Stop()

	start := time.Now()
	for i := range 100 {
		if class, _ := one.Classify(append(prompt, byte(i))); class != exporter.ClassRepeatedPrefix {
			t.Fatalf("fallback %d: local index says %s", i, class)
		}
	}
	t.Logf("100 classifications with Redis down took %s", time.Since(start))
	if n := fallbacks.Load(); n != 100 {
		t.Errorf("fallbacks = %d, want 100", n)
	}

	srv.Restart()
	other := []byte(strings.Repeat("y", 1000))
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := fallbacks.Load()
		one.Classify(other)
		if fallbacks.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still falling back 5s after Redis came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// two may still wait out its own retry interval, falling back until
	// then: a prompt only one has seen is repeated for two only through
	// Redis.
	for i, deadline := 0, time.Now().Add(5*time.Second); ; i++ {
		seen := append([]byte(strings.Repeat("z", 1000)), byte(i))
		one.Classify(seen)
		before := fallbacks.Load()
		class, _ := two.Classify(seen)
		if class == exporter.ClassRepeatedPrefix && fallbacks.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after Redis came back, replica two says %s of a prompt only one has seen", class)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSharedKeysAreBounded(t *testing.T) {
	r := &Redis{}
	ix := r.Index("production", NewIndex(DefaultOptions(), nil))
	for _, n := range []int{1, 63, 64, 65, 64 * 1024, 64*1024 + 1, 64 * 2048, 64*2048 + 1, 4 << 20} {
		keys, ends := ix.keys(make([]byte, n))
		if len(keys) > MaxSharedKeys || len(keys) != len(ends) || ends[len(ends)-1] != n {
			t.Errorf("%d bytes: %d keys, ends up to %d", n, len(keys), ends[len(ends)-1])
		}
		for i := 1; i < len(ends); i++ {
			if ends[i] <= ends[i-1] {
				t.Fatalf("%d bytes: ends not increasing at %d", n, i)
			}
		}
	}
	// A long prompt's coarser boundaries are a subset of a shorter one's.
	short, _ := ix.keys(make([]byte, 64*1024))
	long, _ := ix.keys(make([]byte, 64*4096))
	have := map[string]bool{}
	for _, k := range short {
		have[k] = true
	}
	if !have[long[len(short)/4-1]] {
		t.Error("the long prompt's keys do not meet the short prompt's")
	}
}

func TestNewRedisNeverEchoesTheURL(t *testing.T) {
	for _, u := range []string{"http://u:hunter2@h:1", "redis://u:hunter2@", "redis://u:hunter2@h:1/x"} {
		_, err := NewRedis(RedisOptions{URL: u, Timeout: time.Second, PoolSize: 1})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// BenchmarkSharedClassify is the cost of one classification of a 4 KiB
// prompt against Redis on loopback, the local index's included.
func BenchmarkSharedClassify(b *testing.B) {
	srv := redistest.Start(b)
	var fallbacks atomic.Int64
	r := rand.New(rand.NewPCG(6, 6))
	prompt := []byte(randomText(r, 4096))
	b.Run("repeated", func(b *testing.B) {
		ix := newShared(b, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
		b.ReportAllocs()
		for b.Loop() {
			ix.Classify(prompt)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		ix := newShared(b, srv.URL(), &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
		b.ReportAllocs()
		var n uint64
		for b.Loop() {
			n++
			binary.BigEndian.PutUint64(prompt, n)
			ix.Classify(prompt)
		}
	})
	b.Run("redis_down", func(b *testing.B) {
		ix := newShared(b, "redis://127.0.0.1:1", &fallbacks).Index("production", NewIndex(DefaultOptions(), nil))
		b.ReportAllocs()
		for b.Loop() {
			ix.Classify(prompt)
		}
	})
	if fallbacks.Load() == 0 {
		b.Fatal("redis_down never fell back")
	}
}
