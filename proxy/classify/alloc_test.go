package classify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// bodySize is the proxy's default MIRROR_MAX_BODY_BYTES.
const bodySize = 4 << 20

// largeBody is a body of about bodySize bytes, and the most ParsePrompt may
// allocate reading it.
type largeBody struct {
	name  string
	body  []byte
	limit func(body []byte, p Prompt) int
}

// ignored allows a constant: the text of a short prompt, and an error.
func ignored([]byte, Prompt) int { return 1 << 10 }

// twiceTheBody allows what the brief of the rewrite allowed, 2 bytes a body
// byte.
func twiceTheBody(body []byte, _ Prompt) int { return 2*len(body) + 1<<10 }

// theText allows the text, and a tenth more.
func theText(_ []byte, p Prompt) int { return len(p.Text) + len(p.Text)/10 + 1<<10 }

// planned allows the text and the order of keys, 16 bytes an object and 4
// a member, for a body that is nothing but objects written as canonical
// JSON.
func planned(body []byte, p Prompt) int { return len(p.Text) + 3*len(body) + 1<<10 }

func largeBodies(t testing.TB) []largeBody {
	return []largeBody{
		{"numbers in an ignored field", numbersBody(), ignored},
		{"deep values in an ignored field", deepBody(), ignored},
		{"deeper than allowed", []byte(`{"prompt":"p","x":` + strings.Repeat("[", bodySize) + `}`), ignored},
		{"not an object", []byte(strings.Repeat("[", bodySize)), ignored},
		{"token-ID prompts", tokenBatchBody(bodySize, 1), twiceTheBody},
		{"chat of small messages", smallMessagesBody(t), twiceTheBody},
		{"chat of one long message", chatBody(t, [2]string{"user", randomText(rand.New(rand.NewPCG(3, 3)), bodySize)}), theText},
		{"tool calls", toolCallsBody(), twiceTheBody},
		{"numbers in a field that loses", numbersInInstructionsBody(), ignored},
		{"one object of many members", objectsBody(`{"prompt":["x",{`, `"%x":0`, `}]}`), planned},
		{"objects in one object", objectsBody(`{"prompt":["x",{"a":[`, `{"":%d}`, `]}]}`), planned},
		{"unsorted objects in one object", objectsBody(`{"prompt":["x",{"a":[`, `{"b":%d,"a":0}`, `]}]}`), planned},
	}
}

func numbersBody() []byte {
	b := []byte(`{"model":"m","prompt":"Once upon a time","logit_bias":[`)
	for i := 0; len(b) < bodySize; i++ {
		b = strconv.AppendFloat(b, float64(i)*1.5, 'g', -1, 64)
		b = append(b, ',')
	}
	return append(b, "0]}"...)
}

// numbersInInstructionsBody is a chat with Responses instructions, which
// messages override.
func numbersInInstructionsBody() []byte {
	b := []byte(`{"messages":[{"role":"user","content":"Hi"}],"instructions":[`)
	for i := 0; len(b) < bodySize; i++ {
		b = strconv.AppendFloat(b, float64(i)*1.5, 'g', -1, 64)
		b = append(b, ',')
	}
	return append(b, "0]}"...)
}

// objectsBody repeats member, formatted with a counter, between head and
// tail.
func objectsBody(head, member, tail string) []byte {
	b := []byte(head)
	for i := 0; len(b) < bodySize; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, member, i)
	}
	return append(b, tail...)
}

// deepBody holds ignored values nested to encoding/json's depth limit.
func deepBody() []byte {
	b := []byte(`{"prompt":"p"`)
	for i := 0; len(b) < bodySize; i++ {
		b = fmt.Appendf(b, `,"x%d":`, i)
		if i%2 == 0 {
			b = append(b, strings.Repeat("[", maxDepth-1)+strings.Repeat("]", maxDepth-1)...)
		} else {
			b = append(b, strings.Repeat(`{"a":`, maxDepth-1)+"0"+strings.Repeat("}", maxDepth-1)...)
		}
	}
	return append(b, '}')
}

func smallMessagesBody(t testing.TB) []byte {
	var messages [][2]string
	for i, size := 0, 0; size < bodySize; i++ {
		m := [2]string{[]string{"user", "assistant"}[i%2], "message " + strconv.Itoa(i)}
		messages = append(messages, m)
		size += len(`{"role":"","content":""},`) + len(m[0]) + len(m[1])
	}
	return chatBody(t, messages...)
}

// toolCallsBody is a chat whose assistant messages call tools: objects
// written as canonical JSON.
func toolCallsBody() []byte {
	b := []byte(`{"model":"m","messages":[{"role":"user","content":"Go."}`)
	for i := 0; len(b) < bodySize; i++ {
		b = fmt.Appendf(b, `,{"role":"assistant","content":null,"tool_calls":[{"type":"function","id":"call_%d","function":{"name":"lookup","arguments":"{\"id\":%d,\"fields\":[\"name\",\"email\"]}"}}]}`, i, i)
		b = fmt.Appendf(b, `,{"role":"tool","tool_call_id":"call_%d","content":"{\"name\":\"N%d\",\"email\":\"n%d@example.com\"}"}`, i, i, i)
	}
	return append(b, "]}"...)
}

// allocated returns the bytes parse allocates reading body, the least of a
// few runs.
func allocated(parse func([]byte) (Prompt, error), body []byte) (uint64, Prompt) {
	least := uint64(math.MaxUint64)
	var p Prompt
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, _ = parse(body)
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least, p
}

func TestParsePromptAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, c := range largeBodies(t) {
		t.Run(c.name, func(t *testing.T) {
			got, p := allocated(ParsePrompt, c.body)
			if limit := c.limit(c.body, p); got > uint64(limit) {
				t.Errorf("%d-byte body, %d-byte text: allocated %d bytes, want at most %d", len(c.body), len(p.Text), got, limit)
			}
			if testing.Verbose() {
				reference, _ := allocated(referenceParsePrompt, c.body)
				t.Logf("%d-byte body, %d-byte text: allocated %d bytes (%.2f a body byte), reference %d (%.2f)",
					len(c.body), len(p.Text), got, float64(got)/float64(len(c.body)), reference, float64(reference)/float64(len(c.body)))
			}
		})
	}
}

func BenchmarkParsePrompt(b *testing.B) {
	r := rand.New(rand.NewPCG(10, 10))
	bodies := append([]largeBody{{name: "chat of 4 KiB", body: chatBody(b, [2]string{"system", randomText(r, 2048)}, [2]string{"user", randomText(r, 1024)}, [2]string{"assistant", randomText(r, 512)}, [2]string{"user", randomText(r, 512)})}},
		largeBodies(b)...)
	for _, c := range bodies {
		for _, impl := range []struct {
			name  string
			parse func([]byte) (Prompt, error)
		}{{"new", ParsePrompt}, {"reference", referenceParsePrompt}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					impl.parse(c.body)
				}
			})
		}
	}
}
