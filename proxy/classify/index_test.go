package classify

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func chatBody(t testing.TB, messages ...[2]string) []byte {
	t.Helper()
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	body := struct {
		Model    string    `json:"model"`
		Messages []message `json:"messages"`
	}{Model: "m"}
	for _, m := range messages {
		body.Messages = append(body.Messages, message{m[0], m[1]})
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t testing.TB, body []byte) Prompt {
	t.Helper()
	p, err := ParsePrompt(body)
	if err != nil {
		t.Fatalf("ParsePrompt(%s): %v", body, err)
	}
	return p
}

func reusedBytes(reuse float64, prompt []byte) int {
	return int(math.Round(reuse * float64(len(prompt))))
}

// randomText returns n bytes of printable text that no other call repeats
// at any offset with meaningful probability.
func randomText(r *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

func TestSharedSystemPromptIsRepeated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	system := randomText(r, 1500)
	ix := NewIndex(DefaultOptions(), newFakeClock().now)
	systemChunks := len(mustParse(t, chatBody(t, [2]string{"system", system})).Text) / 64 * 64
	for i := range 20 {
		question := fmt.Sprintf("question %d: %s", i, randomText(r, 200))
		p := mustParse(t, chatBody(t, [2]string{"system", system}, [2]string{"user", question}))
		class, reuse := ix.Classify(p.Text)
		want := exporter.ClassRepeatedPrefix
		if i == 0 {
			want = exporter.ClassFresh
		}
		if class != want {
			t.Errorf("request %d: class %q (reuse %.3f), want %q", i, class, reuse, want)
		}
		if i > 0 && reusedBytes(reuse, p.Text) < systemChunks {
			t.Errorf("request %d: reused %d bytes, want at least the %d bytes of whole chunks of the system prompt", i, reusedBytes(reuse, p.Text), systemChunks)
		}
	}
}

func TestUniquePromptsAreFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	ix := NewIndex(DefaultOptions(), newFakeClock().now)
	for i := range 100 {
		p := mustParse(t, chatBody(t, [2]string{"user", randomText(r, 2000)}))
		if class, reuse := ix.Classify(p.Text); class != exporter.ClassFresh || reuse != 0 {
			t.Errorf("prompt %d: class %q, reuse %v; want fresh, 0", i, class, reuse)
		}
	}
}

func TestReuseCountsOnlyPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	shared := randomText(r, 2000)
	ix := NewIndex(DefaultOptions(), newFakeClock().now)
	first := mustParse(t, chatBody(t, [2]string{"user", shared}))
	second := mustParse(t, chatBody(t, [2]string{"system", "be brief"}, [2]string{"user", shared}))
	ix.Classify(first.Text)
	if class, reuse := ix.Classify(second.Text); class != exporter.ClassFresh || reuse != 0 {
		t.Errorf("same text after a different start: class %q, reuse %v; want fresh, 0", class, reuse)
	}
}

func TestMultiTurnConversationIsRepeated(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	ix := NewIndex(DefaultOptions(), newFakeClock().now)
	var history [][2]string
	var previous []byte
	for turn := range 5 {
		userBytes := 60
		if turn == 0 {
			userBytes = 400
		}
		history = append(history, [2]string{"user", randomText(r, userBytes)})
		p := mustParse(t, chatBody(t, history...))
		class, reuse := ix.Classify(p.Text)
		if turn == 0 {
			if class != exporter.ClassFresh {
				t.Errorf("turn 0: class %q, want fresh", class)
			}
		} else {
			if class != exporter.ClassRepeatedPrefix {
				t.Errorf("turn %d: class %q (reuse %.3f), want repeated_prefix", turn, class, reuse)
			}
			wantReused := len(previous) / 64 * 64
			if got := reusedBytes(reuse, p.Text); got != wantReused {
				t.Errorf("turn %d: reused %d bytes, want the %d whole chunks of the previous turn", turn, got, wantReused)
			}
		}
		previous = p.Text
		history = append(history, [2]string{"assistant", randomText(r, 150)})
	}
}

func TestIdenticalPromptIsFullyReused(t *testing.T) {
	ix := NewIndex(DefaultOptions(), newFakeClock().now)
	prompt := bytes.Repeat([]byte("0123456789"), 30)
	if class, reuse := ix.Classify(prompt); class != exporter.ClassFresh || reuse != 0 {
		t.Fatalf("first: class %q, reuse %v; want fresh, 0", class, reuse)
	}
	if class, reuse := ix.Classify(prompt); class != exporter.ClassRepeatedPrefix || reuse != 1 {
		t.Errorf("second: class %q, reuse %v; want repeated_prefix, 1", class, reuse)
	}
}

func TestThresholds(t *testing.T) {
	opts := Options{ChunkBytes: 10, MaxEntries: 100, MinFraction: 0.5, MinBytes: 40}
	cases := []struct {
		name       string
		seen, next string
		want       string
	}{
		{"half reused, enough bytes", strings.Repeat("a", 40), strings.Repeat("a", 40) + strings.Repeat("b", 40), exporter.ClassRepeatedPrefix},
		{"under half reused", strings.Repeat("a", 40), strings.Repeat("a", 40) + strings.Repeat("b", 41), exporter.ClassFresh},
		{"too few bytes", strings.Repeat("a", 30), strings.Repeat("a", 30) + "b", exporter.ClassFresh},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := NewIndex(opts, newFakeClock().now)
			ix.Classify([]byte(c.seen))
			if got, reuse := ix.Classify([]byte(c.next)); got != c.want {
				t.Errorf("class %q (reuse %.3f), want %q", got, reuse, c.want)
			}
		})
	}
}

func TestTTLExpiry(t *testing.T) {
	clock := newFakeClock()
	opts := DefaultOptions()
	ix := NewIndex(opts, clock.now)
	prompt := bytes.Repeat([]byte("x"), 1000)
	other := bytes.Repeat([]byte("y"), 1000)
	ix.Classify(prompt)
	ix.Classify(other)

	clock.advance(opts.TTL - time.Second)
	if class, _ := ix.Classify(prompt); class != exporter.ClassRepeatedPrefix {
		t.Fatalf("just before TTL: class %q, want repeated_prefix", class)
	}
	clock.advance(opts.TTL - time.Second)
	if class, _ := ix.Classify(prompt); class != exporter.ClassRepeatedPrefix {
		t.Errorf("a hit did not refresh the entry: class %q, want repeated_prefix", class)
	}
	if class, _ := ix.Classify(other); class != exporter.ClassFresh {
		t.Errorf("entry unseen for longer than TTL: class %q, want fresh", class)
	}

	checkList(t, ix)
	clock.advance(opts.TTL)
	if n := ix.Len(); n != 0 {
		t.Errorf("Len after TTL without traffic = %d, want 0", n)
	}
	if class, reuse := ix.Classify(prompt); class != exporter.ClassFresh || reuse != 0 {
		t.Errorf("after TTL: class %q, reuse %v; want fresh, 0", class, reuse)
	}
}

func TestZeroTTLNeverExpires(t *testing.T) {
	clock := newFakeClock()
	opts := DefaultOptions()
	opts.TTL = 0
	ix := NewIndex(opts, clock.now)
	prompt := bytes.Repeat([]byte("x"), 1000)
	ix.Classify(prompt)
	clock.advance(1000 * time.Hour)
	if class, _ := ix.Classify(prompt); class != exporter.ClassRepeatedPrefix {
		t.Errorf("class %q, want repeated_prefix", class)
	}
}

func TestMaxEntriesBound(t *testing.T) {
	const maxEntries = 50
	opts := DefaultOptions()
	opts.MaxEntries = maxEntries
	ix := NewIndex(opts, newFakeClock().now)
	r := rand.New(rand.NewPCG(5, 5))
	reached := false
	for i := range 500 {
		prompt := []byte(randomText(r, r.IntN(2000)))
		_, reuse := ix.Classify(prompt)
		if reuse < 0 || reuse > 1 {
			t.Fatalf("prompt %d: reuse %v outside [0, 1]", i, reuse)
		}
		n := ix.Len()
		if n > maxEntries {
			t.Fatalf("prompt %d: Len = %d > MaxEntries %d", i, n, maxEntries)
		}
		reached = reached || n == maxEntries
		checkList(t, ix)
	}
	if !reached {
		t.Error("the index never filled up; the test does not exercise eviction")
	}
}

func TestEvictsLeastRecentlySeen(t *testing.T) {
	opts := Options{ChunkBytes: 10, MaxEntries: 8, MinFraction: 0.5, MinBytes: 10}
	ix := NewIndex(opts, newFakeClock().now)
	a := []byte(strings.Repeat("a", 40))
	b := []byte(strings.Repeat("b", 40))
	c := []byte(strings.Repeat("c", 40))
	ix.Classify(a)
	ix.Classify(b)
	ix.Classify(a)
	ix.Classify(c)
	if _, reuse := ix.Classify(a); reuse != 1 {
		t.Errorf("recently seen prompt: reuse %v, want 1", reuse)
	}
	if _, reuse := ix.Classify(b); reuse != 0 {
		t.Errorf("least recently seen prompt: reuse %v, want 0 (evicted)", reuse)
	}
}

func TestEvictsLongerPrefixesFirst(t *testing.T) {
	opts := Options{ChunkBytes: 10, MaxEntries: 4, MinFraction: 0.5, MinBytes: 10}
	ix := NewIndex(opts, newFakeClock().now)
	prompt := []byte("0000000000111111111122222222223333333333444444444455555555556666666666")
	ix.Classify(prompt)
	if n := ix.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}
	if _, reuse := ix.Classify(prompt[:40]); reuse != 1 {
		t.Errorf("the 40-byte prefix: reuse %v, want 1", reuse)
	}
	if _, reuse := ix.Classify(prompt[:60]); reuse != 40.0/60 {
		t.Errorf("the 60-byte prefix: reuse %v, want %v", reuse, 40.0/60)
	}
}

func TestConcurrentClassify(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxEntries = 200
	ix := NewIndex(opts, nil)
	shared := strings.Repeat("shared system prompt ", 50)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				_, reuse := ix.Classify([]byte(fmt.Sprintf("%s goroutine %d request %d", shared, g, i)))
				if reuse < 0 || reuse > 1 {
					errs <- fmt.Errorf("reuse %v outside [0, 1]", reuse)
					return
				}
				if n := ix.Len(); n > opts.MaxEntries {
					errs <- fmt.Errorf("Len = %d > MaxEntries %d", n, opts.MaxEntries)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestEmptyPrompt(t *testing.T) {
	ix := NewIndex(DefaultOptions(), nil)
	if class, reuse := ix.Classify(nil); class != exporter.ClassFresh || reuse != 0 {
		t.Errorf("class %q, reuse %v; want fresh, 0", class, reuse)
	}
	if n := ix.Len(); n != 0 {
		t.Errorf("Len = %d, want 0", n)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions: %v", err)
	}
	cases := []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.ChunkBytes = 0 }, "classify: ChunkBytes must be positive, got 0"},
		{func(o *Options) { o.MaxEntries = -1 }, "classify: MaxEntries must be in [1, 2147483647], got -1"},
		{func(o *Options) { o.TTL = -time.Second }, "classify: TTL must not be negative, got -1s"},
		{func(o *Options) { o.MinFraction = 1.5 }, "classify: MinFraction must be in [0, 1], got 1.5"},
		{func(o *Options) { o.MinFraction = math.NaN() }, "classify: MinFraction must be in [0, 1], got NaN"},
		{func(o *Options) { o.MinBytes = -1 }, "classify: MinBytes must not be negative, got -1"},
	}
	for _, c := range cases {
		opts := DefaultOptions()
		c.edit(&opts)
		err := opts.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("Validate(%+v) = %v, want %q", opts, err, c.want)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewIndex(%+v) did not panic", opts)
				}
			}()
			NewIndex(opts, nil)
		}()
	}
}

func BenchmarkClassify(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	prompt := []byte(randomText(r, 4096))
	b.Run("repeated", func(b *testing.B) {
		ix := NewIndex(DefaultOptions(), nil)
		b.SetBytes(int64(len(prompt)))
		b.ReportAllocs()
		for b.Loop() {
			ix.Classify(prompt)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		ix := NewIndex(DefaultOptions(), nil)
		b.SetBytes(int64(len(prompt)))
		b.ReportAllocs()
		var n uint64
		for b.Loop() {
			n++
			binary.BigEndian.PutUint64(prompt, n)
			ix.Classify(prompt)
		}
	})
}

func TestTTLWithDefaultClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := DefaultOptions()
		ix := NewIndex(opts, nil)
		prompt := bytes.Repeat([]byte("x"), 1000)
		ix.Classify(prompt)
		time.Sleep(opts.TTL / 2)
		if class, _ := ix.Classify(prompt); class != exporter.ClassRepeatedPrefix {
			t.Errorf("within TTL: class %q, want repeated_prefix", class)
		}
		time.Sleep(opts.TTL)
		if n := ix.Len(); n != 0 {
			t.Errorf("Len after TTL = %d, want 0", n)
		}
	})
}
