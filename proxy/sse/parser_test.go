package sse

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

type event struct{ name, data string }

// collect feeds chunks to a fresh Parser and returns the events it emits.
func collect(chunks ...[]byte) []event {
	var p Parser
	var got []event
	for _, c := range chunks {
		p.Feed(c, func(e Event) { got = append(got, event{e.Name, string(e.Data)}) })
	}
	return got
}

// splits returns b in one piece, byte by byte, and split in two at every
// position.
func splits(b []byte) [][][]byte {
	out := [][][]byte{{b}}
	var bytewise [][]byte
	for i := range b {
		bytewise = append(bytewise, b[i:i+1])
	}
	out = append(out, bytewise)
	for i := 1; i < len(b); i++ {
		out = append(out, [][]byte{b[:i], b[i:]})
	}
	return out
}

func TestParser(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  []event
	}{
		{"LF", "data: a\n\n", []event{{"", "a"}}},
		{"CRLF", "data: a\r\n\r\n", []event{{"", "a"}}},
		{"CR", "data: a\r\r", []event{{"", "a"}}},
		{"mixed line ends", "data: a\r\ndata: b\rdata: c\n\r\n", []event{{"", "a\nb\nc"}}},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []event{{"", "{\"a\":\n1}"}}},
		{"comments", ": ping\n\ndata: x\n: keep-alive\n\n", []event{{"", "x"}}},
		{"event name", "event: response.created\ndata: {}\n\n", []event{{"response.created", "{}"}}},
		{"last event name wins", "event: a\nevent: b\ndata: 1\n\n", []event{{"b", "1"}}},
		{"name reset after dispatch", "event: e\ndata: 1\n\ndata: 2\n\n", []event{{"e", "1"}, {"", "2"}}},
		{"name without data is dropped", "event: e\n\ndata: 2\n\n", []event{{"", "2"}}},
		{"no space after colon", "data:x\n\n", []event{{"", "x"}}},
		{"only one space removed", "data:  x \n\n", []event{{"", " x "}}},
		{"colon inside value", "data: {\"a\":\"b:c\"}\n\n", []event{{"", `{"a":"b:c"}`}}},
		{"field without colon", "data\n\n", []event{{"", ""}}},
		{"empty data lines", "data:\ndata:\n\n", []event{{"", "\n"}}},
		{"id retry and unknown fields ignored", "id: 7\nretry: 100\nfoo: bar\ndata: x\n\n", []event{{"", "x"}}},
		{"field names are case-sensitive", "Data: x\n\n", nil},
		{"byte order mark", "\uFEFFdata: x\n\n", []event{{"", "x"}}},
		{"byte order mark only at start", "data: x\n\n\uFEFFdata: y\n\n", []event{{"", "x"}}},
		{"unterminated event dropped", "data: x\n\ndata: y\n", []event{{"", "x"}}},
		{"unterminated line dropped", "data: x\n\ndata: y", []event{{"", "x"}}},
		{"done", "data: [DONE]\n\n", []event{{"", "[DONE]"}}},
		{"blank lines only", "\n\n\r\n\r", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunks := range splits([]byte(tc.input)) {
				if got := collect(chunks...); !slices.Equal(got, tc.want) {
					t.Fatalf("fed as %q: got %q, want %q", chunks, got, tc.want)
				}
			}
		})
	}
}

func TestParserDropsOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes)
	fits := strings.Repeat("y", MaxLineBytes-len("data: "))
	for _, tc := range []struct {
		name  string
		input string
		want  []event
	}{
		{"overlong line", "data: " + long + "\ndata: a\n\ndata: b\n\n", []event{{"", "a"}, {"", "b"}}},
		{"line at the limit", "data: " + fits[:len(fits)-1] + "\n\n", []event{{"", fits[:len(fits)-1]}}},
		{"overlong event", "data: " + long[:MaxLineBytes/2] + "\ndata: " + long[:MaxLineBytes/2] + "\n\ndata: b\n\n", []event{{"", "b"}}},
		{"overlong comment", ":" + long + "\r\ndata: a\n\n", []event{{"", "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.input)
			for _, size := range []int{len(in), 4096, 1000003} {
				var chunks [][]byte
				for c := range slices.Chunk(in, size) {
					chunks = append(chunks, c)
				}
				got := collect(chunks...)
				if len(got) != len(tc.want) {
					t.Fatalf("chunks of %d: got %d events, want %d", size, len(got), len(tc.want))
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Fatalf("chunks of %d: event %d differs", size, i)
					}
				}
			}
		})
	}
}

// TestParserBuffersWithinMaxLineBytes feeds a name, a line and data each
// just under the limit, a few bytes at a time: no buffer's capacity goes
// past MaxLineBytes.
func TestParserBuffersWithinMaxLineBytes(t *testing.T) {
	var p Parser
	long := strings.Repeat("x", MaxLineBytes-len("data: ")-1)
	stream := []byte("event: " + long + "\ndata: " + long + "\n\n")
	events := 0
	for c := range slices.Chunk(stream, 4093) {
		p.Feed(c, func(e Event) {
			events++
			if len(e.Name) != len(long) || len(e.Data) != len(long) {
				t.Fatalf("event of a %d-byte name and %d bytes of data", len(e.Name), len(e.Data))
			}
		})
		if cap(p.line) > MaxLineBytes || cap(p.data) > MaxLineBytes || cap(p.name) > MaxLineBytes {
			t.Fatalf("buffers of %d, %d and %d bytes", cap(p.line), cap(p.data), cap(p.name))
		}
	}
	if events != 1 {
		t.Fatalf("%d events, want 1", events)
	}
}

func TestParserReleasesLargeBuffers(t *testing.T) {
	var p Parser
	big := "event: " + strings.Repeat("n", 2*retainBytes) + "\ndata: " + strings.Repeat("x", 2*retainBytes)
	p.Feed([]byte(big), func(Event) {})
	p.Feed([]byte("\n\n"), func(Event) {})
	if cap(p.line) > retainBytes || cap(p.data) > retainBytes || cap(p.name) > retainBytes {
		t.Fatalf("parser keeps %d line, %d data and %d name bytes after the event", cap(p.line), cap(p.data), cap(p.name))
	}
}

func TestParserDoesNotRetainInput(t *testing.T) {
	var p Parser
	var got []string
	emit := func(e Event) { got = append(got, string(e.Data)) }
	chunk := []byte("event: ab\ndata: cd")
	p.Feed(chunk, emit)
	copy(chunk, bytes.Repeat([]byte("z"), len(chunk)))
	p.Feed([]byte("ef\n\n"), emit)
	if !slices.Equal(got, []string{"cdef"}) {
		t.Fatalf("got %q, want [cdef]", got)
	}
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"text/event-stream; charset=utf-8": true,
		"Text/Event-Stream":                true,
		"application/json":                 false,
		"text/plain":                       false,
		"":                                 false,
		"text/event-stream;;":              false,
	} {
		if got := IsEventStream(ct); got != want {
			t.Errorf("IsEventStream(%q) = %v, want %v", ct, got, want)
		}
	}
}

// countingBudget is a Budget of limit bytes that remembers what is out.
type countingBudget struct{ limit, used int64 }

func (b *countingBudget) Take(n int64) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *countingBudget) Give(n int64) { b.used -= n }

func TestParserTakesLongLinesFromItsBudget(t *testing.T) {
	budget := &countingBudget{limit: 256 << 10}
	var p Parser
	p.SetBudget(budget)
	var got []string
	emit := func(ev Event) { got = append(got, string(ev.Data)) }
	long := "data: " + strings.Repeat("x", 50<<10) + "\n\n"
	tooLong := "data: " + strings.Repeat("y", 600<<10) + "\n\n"
	// Fed a byte at a time, each line is carried whole in the line buffer.
	for _, frame := range []string{long, tooLong, "data: short\n\n", long} {
		for i := range len(frame) {
			p.Feed([]byte{frame[i]}, emit)
			if budget.used > budget.limit {
				t.Fatalf("parser took %d bytes of a %d budget", budget.used, budget.limit)
			}
		}
	}
	if len(got) != 3 || got[0] != long[6:len(long)-2] || got[1] != "short" || got[2] != long[6:len(long)-2] {
		t.Errorf("events %d, want the two long ones and the short one, without the one over budget", len(got))
	}
	if !p.Dropped() {
		t.Error("Dropped is false after a line was dropped for the budget")
	}
	p.Release()
	if budget.used != 0 {
		t.Errorf("%d bytes still taken after Release", budget.used)
	}
	p.Feed([]byte(long), emit)
	if budget.used != 0 || len(got) != 3 {
		t.Errorf("a released parser took %d bytes and emitted %d events", budget.used, len(got)-3)
	}
}

func TestParserSaysWhenALineIsTooLong(t *testing.T) {
	var p Parser
	var got int
	p.Feed([]byte("data: short\n\n"), func(Event) { got++ })
	if p.Dropped() || got != 1 {
		t.Fatalf("a short event: dropped %v, %d events", p.Dropped(), got)
	}
	p.Feed([]byte("data: "+strings.Repeat("x", MaxLineBytes+1)+"\n\ndata: after\n\n"), func(Event) { got++ })
	if !p.Dropped() || got != 2 {
		t.Errorf("a line over MaxLineBytes: dropped %v, %d events; want true and only the event after it", p.Dropped(), got)
	}
}
