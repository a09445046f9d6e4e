package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/kestrelops/tandem/exporter"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// request is one planned request.
type request struct {
	class          string
	conversationID string
	turn           int
	messages       []Message
	maxTokens      int
}

func (r request) promptWords() int {
	n := 0
	for _, m := range r.messages {
		n += len(strings.Fields(m.Content))
	}
	return n
}

// conversation is a multi-turn chat that starts with a shared system prompt.
// Its assistant replies are made up by the load generator, so that the
// workload does not depend on responses.
type conversation struct {
	id       string
	history  []Message
	turns    int
	maxTurns int
}

// workload draws requests. A repeated-prefix request starts a new
// conversation on a shared system prompt (with probability 1/Turns, or when
// none is open) or continues an open one, resending its whole history; a
// fresh request is a single message of random words.
type workload struct {
	c      Config
	rng    *rand.Rand
	shared []string
	open   []*conversation
	nextID int
}

func newWorkload(c Config) *workload {
	w := &workload{c: c, rng: rand.New(rand.NewPCG(uint64(c.Seed), 0x776f726b))}
	for range c.SharedPrompts {
		w.shared = append(w.shared, w.words(c.SharedPrefixWords))
	}
	return w
}

func (w *workload) next() request {
	maxTokens := w.lognormal(w.c.OutputTokens, 0.3)
	if w.rng.Float64() >= w.c.RepeatShare {
		return request{
			class:          exporter.ClassFresh,
			conversationID: w.newID(),
			turn:           1,
			messages:       []Message{{Role: "user", Content: w.words(w.lognormal(w.c.PromptWords, 0.5))}},
			maxTokens:      maxTokens,
		}
	}
	var conv *conversation
	if len(w.open) == 0 || w.rng.Float64() < 1/float64(w.c.Turns) {
		conv = &conversation{
			id:       w.newID(),
			history:  []Message{{Role: "system", Content: w.shared[w.rng.IntN(len(w.shared))]}},
			maxTurns: 1 + w.rng.IntN(2*w.c.Turns-1),
		}
		w.open = append(w.open, conv)
	} else {
		conv = w.open[w.rng.IntN(len(w.open))]
	}
	conv.history = append(conv.history, Message{Role: "user", Content: w.words(w.lognormal(w.c.TurnWords, 0.5))})
	conv.turns++
	req := request{
		class:          exporter.ClassRepeatedPrefix,
		conversationID: conv.id,
		turn:           conv.turns,
		messages:       append([]Message(nil), conv.history...),
		maxTokens:      maxTokens,
	}
	conv.history = append(conv.history, Message{Role: "assistant", Content: w.words(maxTokens)})
	if conv.turns >= conv.maxTurns {
		w.close(conv)
	}
	return req
}

func (w *workload) close(conv *conversation) {
	for i, c := range w.open {
		if c == conv {
			w.open = append(w.open[:i], w.open[i+1:]...)
			return
		}
	}
}

func (w *workload) newID() string {
	w.nextID++
	return fmt.Sprintf("conv-%d-%06d", w.c.Seed, w.nextID)
}

// lognormal draws a positive integer with the given mean.
func (w *workload) lognormal(mean int, sigma float64) int {
	v := float64(mean) * math.Exp(sigma*w.rng.NormFloat64()-sigma*sigma/2)
	return max(1, int(math.Round(v)))
}

func (w *workload) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[w.rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// vocabulary is the words prompts are made of: enough of them that two
// random 16-word blocks practically never coincide.
var vocabulary = func() []string {
	consonants := "bcdfghjklmnprstvwz"
	vowels := "aeiou"
	var words []string
	for _, c1 := range consonants {
		for _, v1 := range vowels {
			for _, c2 := range consonants {
				for _, v2 := range vowels {
					words = append(words, string([]rune{c1, v1, c2, v2}))
				}
			}
		}
	}
	return words
}()
