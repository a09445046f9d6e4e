package classify

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// conversationTurns returns the prompts of every turn of n synthetic
// conversations sharing one system prompt.
func conversationTurns(t testing.TB, n int) [][]Prompt {
	r := rand.New(rand.NewPCG(7, 7))
	conversations := make([][]Prompt, n)
	for c := range conversations {
		history := [][2]string{{"system", "You are a helpful assistant."}, {"user", fmt.Sprintf("conversation %d: %s", c, randomText(r, 20))}}
		for range 1 + r.IntN(5) {
			conversations[c] = append(conversations[c], mustParse(t, chatBody(t, history...)))
			history = append(history, [2]string{"assistant", randomText(r, 20)}, [2]string{"user", randomText(r, 20)})
		}
	}
	return conversations
}

func TestConversationSamplingKeepsConversationsTogether(t *testing.T) {
	const (
		n    = 2000
		rate = 0.3
	)
	s := NewConversationSampler(rate)
	sampled := 0
	for c, turns := range conversationTurns(t, n) {
		first := s.Sampled("", turns[0])
		for i, p := range turns[1:] {
			if got := s.Sampled("", p); got != first {
				t.Fatalf("conversation %d: turn %d sampled %v, turn 0 %v", c, i+1, got, first)
			}
		}
		if first {
			sampled++
		}
	}
	// Four standard deviations of a binomial(n, rate) share.
	tolerance := 4 * math.Sqrt(rate*(1-rate)/n)
	if share := float64(sampled) / n; math.Abs(share-rate) > tolerance {
		t.Errorf("sampled share %.4f, want %.2f ± %.4f", share, rate, tolerance)
	}
}

func TestRequestSamplingSplitsConversations(t *testing.T) {
	s := NewRequestSampler(0.5, rand.New(rand.NewPCG(8, 8)).Float64)
	split := 0
	for _, turns := range conversationTurns(t, 200) {
		first := s.Sampled("", turns[0])
		for _, p := range turns[1:] {
			if s.Sampled("", p) != first {
				split++
				break
			}
		}
	}
	if split == 0 {
		t.Error("request sampling kept every conversation together")
	}
}

func TestIndependentSamplersAgree(t *testing.T) {
	a, b := NewConversationSampler(0.3), NewConversationSampler(0.3)
	for _, turns := range conversationTurns(t, 300) {
		for _, p := range turns {
			if a.Sampled("", p) != b.Sampled("", p) {
				t.Fatalf("samplers disagree on key %q", p.ConversationKey)
			}
		}
	}
}

const decisionsEnv = "TANDEM_CLASSIFY_PRINT_DECISIONS"

func sampleDecisions() string {
	s := NewConversationSampler(0.3)
	var b strings.Builder
	for i := range 256 {
		p := Prompt{ConversationKey: fmt.Appendf(nil, "conversation %d", i)}
		fmt.Fprint(&b, map[bool]int{false: 0, true: 1}[s.Sampled("", p)])
	}
	return b.String()
}

// TestSamplerAgreesAcrossProcesses stands in for two tandem replicas: it
// runs the test binary again and compares its decisions with its own.
func TestSamplerAgreesAcrossProcesses(t *testing.T) {
	if os.Getenv(decisionsEnv) != "" {
		fmt.Println("decisions:" + sampleDecisions())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSamplerAgreesAcrossProcesses$")
	cmd.Env = append(os.Environ(), decisionsEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child process: %v", err)
	}
	var theirs string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if d, ok := strings.CutPrefix(sc.Text(), "decisions:"); ok {
			theirs = d
		}
	}
	mine := sampleDecisions()
	if theirs != mine {
		t.Errorf("decisions differ between processes:\nchild  %s\nparent %s", theirs, mine)
	}
	if !strings.Contains(mine, "0") || !strings.Contains(mine, "1") {
		t.Errorf("decisions %s are all the same; the comparison proves nothing", mine)
	}
}

func TestHeaderKeyOverridesConversationKey(t *testing.T) {
	s := NewConversationSampler(0.5)
	turns := conversationTurns(t, 200)
	differs := 0
	for i, conv := range turns {
		header := fmt.Sprintf("session-%d", i)
		want := s.Sampled(header, Prompt{})
		for _, other := range turns[(i+1)%len(turns)] {
			if got := s.Sampled(header, other); got != want {
				t.Fatalf("header %q: decision %v depends on the prompt (%v without one)", header, got, want)
			}
		}
		if s.Sampled("", conv[0]) != want {
			differs++
		}
	}
	if differs == 0 {
		t.Error("header keys never changed a decision; the header is not used")
	}
}

func TestRaisingRateOnlyAddsConversations(t *testing.T) {
	low, high := NewConversationSampler(0.2), NewConversationSampler(0.3)
	added := 0
	for _, turns := range conversationTurns(t, 300) {
		l, h := low.Sampled("", turns[0]), high.Sampled("", turns[0])
		if l && !h {
			t.Fatalf("key %q sampled at rate 0.2 but not at 0.3", turns[0].ConversationKey)
		}
		if h && !l {
			added++
		}
	}
	if added == 0 {
		t.Error("rate 0.3 added no conversation over rate 0.2")
	}
}

func TestRequestSamplerIsReproducibleWithSeed(t *testing.T) {
	const (
		n    = 10000
		rate = 0.3
	)
	a := NewRequestSampler(rate, rand.New(rand.NewPCG(9, 9)).Float64)
	b := NewRequestSampler(rate, rand.New(rand.NewPCG(9, 9)).Float64)
	sampled := 0
	for i := range n {
		da, db := a.Sampled("", Prompt{}), b.Sampled("", Prompt{})
		if da != db {
			t.Fatalf("request %d: equally seeded samplers disagree", i)
		}
		if da {
			sampled++
		}
	}
	tolerance := 4 * math.Sqrt(rate*(1-rate)/n)
	if share := float64(sampled) / n; math.Abs(share-rate) > tolerance {
		t.Errorf("sampled share %.4f, want %.2f ± %.4f", share, rate, tolerance)
	}
}

func TestRateBounds(t *testing.T) {
	always := func() float64 { return 0 }
	never := func() float64 { return math.Nextafter(1, 0) }
	samplers := []struct {
		name string
		s    *Sampler
		want bool
	}{
		{"conversation rate 0", NewConversationSampler(0), false},
		{"conversation rate 1", NewConversationSampler(1), true},
		{"request rate 0", NewRequestSampler(0, always), false},
		{"request rate 1", NewRequestSampler(1, never), true},
		{"request rate -1", NewRequestSampler(-1, always), false},
	}
	keys := conversationTurns(t, 100)
	for _, c := range samplers {
		for _, turns := range keys {
			if got := c.s.Sampled("", turns[0]); got != c.want {
				t.Fatalf("%s: Sampled = %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func TestClassFor(t *testing.T) {
	allowed := map[string]bool{"batch": true, "agent": true}
	cases := []struct {
		header, classified, want string
	}{
		{"", "fresh", "fresh"},
		{"batch", "fresh", "batch"},
		{"agent", "repeated_prefix", "agent"},
		{"unknown", "repeated_prefix", "repeated_prefix"},
		{"Batch", "fresh", "fresh"},
	}
	for _, c := range cases {
		if got := ClassFor(c.header, allowed, c.classified); got != c.want {
			t.Errorf("ClassFor(%q, allowed, %q) = %q, want %q", c.header, c.classified, got, c.want)
		}
	}
	if got := ClassFor("batch", nil, "fresh"); got != "fresh" {
		t.Errorf("nil allowlist: ClassFor = %q, want fresh", got)
	}
}
