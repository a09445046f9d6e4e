package classify

import (
	"bytes"
	"errors"
	"testing"
)

// canon builds expected canonical text: item writes a message header, text
// and value write parts.
type canon []byte

func (c canon) item(role string) canon {
	return append(append(append(c, markItem), role...), markContent)
}
func (c canon) typed(kind string) canon {
	return append(append(append(c, markTyped), kind...), markContent)
}
func (c canon) text(s string) canon  { return append(append(c, markText), s...) }
func (c canon) value(s string) canon { return append(append(c, markValue), s...) }

func TestParsePrompt(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		wantText canon
		wantKey  canon
	}{
		{
			name:     "chat with string content",
			body:     `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}]}`,
			wantText: canon{}.item("system").text("Be brief.").item("user").text("Hi").item("assistant").text("Hello").item("user").text("Bye"),
			wantKey:  canon{}.item("system").text("Be brief.").item("user").text("Hi"),
		},
		{
			name:     "chat with parts, images and tool calls",
			body:     `{"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}]}`,
			wantText: canon{}.item("user").text("What is it?").value(`{"image_url":{"url":"https://x/y.png"},"type":"image_url"}`).item("assistant").value(`[{"function":{"arguments":"{}","name":"f"},"id":"c1","type":"function"}]`).item("tool").text("42"),
			wantKey:  canon{}.item("user").text("What is it?").value(`{"image_url":{"url":"https://x/y.png"},"type":"image_url"}`),
		},
		{
			name:     "completions string",
			body:     `{"model":"m","prompt":"Once upon a time"}`,
			wantText: canon{}.item("prompt").text("Once upon a time"),
			wantKey:  canon{}.item("prompt").text("Once upon a time"),
		},
		{
			name:     "completions array of strings",
			body:     `{"prompt":["a","b"]}`,
			wantText: canon{}.item("prompt").text("a").item("prompt").text("b"),
			wantKey:  canon{}.item("prompt").text("a").item("prompt").text("b"),
		},
		{
			name:     "completions tokens",
			body:     `{"prompt":[1, 2, 3]}`,
			wantText: canon{}.item("prompt").value("[1,2,3]"),
			wantKey:  canon{}.item("prompt").value("[1,2,3]"),
		},
		{
			name:     "completions token arrays",
			body:     `{"prompt":[[1,2],[3]]}`,
			wantText: canon{}.item("prompt").value("[1,2]").item("prompt").value("[3]"),
			wantKey:  canon{}.item("prompt").value("[1,2]").item("prompt").value("[3]"),
		},
		{
			name:     "responses string input with instructions",
			body:     `{"model":"m","instructions":"Be brief.","input":"Hi"}`,
			wantText: canon{}.item("instructions").text("Be brief.").item("user").text("Hi"),
			wantKey:  canon{}.item("instructions").text("Be brief.").item("user").text("Hi"),
		},
		{
			name:     "responses items",
			body:     `{"input":[{"role":"developer","content":"Rules"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
			wantText: canon{}.item("developer").text("Rules").item("user").text("Hi").typed("function_call").value(`{"arguments":"{}","call_id":"c1","name":"f","type":"function_call"}`).typed("function_call_output").value(`{"call_id":"c1","output":"42","type":"function_call_output"}`),
			wantKey:  canon{}.item("developer").text("Rules").item("user").text("Hi"),
		},
		{
			name:     "messages win over input and prompt",
			body:     `{"prompt":"p","input":"i","messages":[{"role":"user","content":"m"}]}`,
			wantText: canon{}.item("user").text("m"),
			wantKey:  canon{}.item("user").text("m"),
		},
		{
			name:     "empty messages",
			body:     `{"messages":[]}`,
			wantText: canon{},
			wantKey:  canon{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParsePrompt([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Text, c.wantText) {
				t.Errorf("Text = %q, want %q", p.Text, c.wantText)
			}
			if !bytes.Equal(p.ConversationKey, c.wantKey) {
				t.Errorf("ConversationKey = %q, want %q", p.ConversationKey, c.wantKey)
			}
		})
	}
}

func TestParsePromptErrors(t *testing.T) {
	for _, body := range []string{
		`not json`,
		`[1, 2]`,
		`"prompt"`,
		`{}`,
		`{"model":"m","messages":null}`,
		`{"messages":"hi"}`,
		`{"messages":[1]}`,
		`{"prompt":5}`,
		`{"prompt":{"text":"hi"}}`,
		`{"input":5}`,
		`{"input":{"role":"user"}}`,
		`{"instructions":"only instructions"}`,
	} {
		if p, err := ParsePrompt([]byte(body)); !errors.Is(err, ErrNoPrompt) {
			t.Errorf("ParsePrompt(%s) = %q, %v; want ErrNoPrompt", body, p.Text, err)
		}
	}
}

func TestStringContentEqualsOneTextPart(t *testing.T) {
	s := mustParse(t, []byte(`{"messages":[{"role":"user","content":"Hello"}]}`))
	parts := mustParse(t, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`))
	if !bytes.Equal(s.Text, parts.Text) {
		t.Errorf("string content %q != text part %q", s.Text, parts.Text)
	}
}

func TestCanonicalTextIsUnambiguous(t *testing.T) {
	pairs := [][2]string{
		{`{"messages":[{"role":"user","content":"ab"}]}`, `{"messages":[{"role":"user","content":[{"text":"a"},{"text":"b"}]}]}`},
		{`{"messages":[{"role":"user","content":"ab"}]}`, `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`},
		{`{"messages":[{"role":"user","content":"x"}]}`, `{"messages":[{"role":"use","content":"rx"}]}`},
		{`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, `{"messages":[{"role":"user","content":"a\u00ffuser\u00feb"}]}`},
		{`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffuser\xfe\xfdb\"}]}"},
		{`{"prompt":["a","b"]}`, `{"prompt":"ab"}`},
		{`{"input":"hi"}`, `{"prompt":"hi"}`},
		{`{"instructions":"a","input":"b"}`, `{"input":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`},
	}
	for _, pair := range pairs {
		a, b := mustParse(t, []byte(pair[0])), mustParse(t, []byte(pair[1]))
		if bytes.Equal(a.Text, b.Text) {
			t.Errorf("%s and %s have the same canonical text %q", pair[0], pair[1], a.Text)
		}
	}
}

func TestConversationKeyStableAcrossTurns(t *testing.T) {
	turn1 := mustParse(t, chatBody(t, [2]string{"system", "S"}, [2]string{"user", "first question"}))
	turn2 := mustParse(t, chatBody(t, [2]string{"system", "S"}, [2]string{"user", "first question"}, [2]string{"assistant", "answer"}, [2]string{"user", "second"}))
	other := mustParse(t, chatBody(t, [2]string{"system", "S"}, [2]string{"user", "another question"}))
	if !bytes.Equal(turn1.ConversationKey, turn2.ConversationKey) {
		t.Errorf("turns of one conversation have keys %q and %q", turn1.ConversationKey, turn2.ConversationKey)
	}
	if bytes.Equal(turn1.ConversationKey, other.ConversationKey) {
		t.Errorf("different first user messages share key %q", turn1.ConversationKey)
	}

	r1 := mustParse(t, []byte(`{"input":[{"role":"user","content":"q"}]}`))
	r2 := mustParse(t, []byte(`{"input":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"output_text","text":"a"}]},{"role":"user","content":"q2"}]}`))
	if !bytes.Equal(r1.ConversationKey, r2.ConversationKey) {
		t.Errorf("Responses turns have keys %q and %q", r1.ConversationKey, r2.ConversationKey)
	}
}

func TestConversationKeyWithoutUserMessage(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 3*KeyBytes)
	p := mustParse(t, []byte(`{"prompt":"`+string(long)+`"}`))
	if len(p.ConversationKey) != KeyBytes || !bytes.HasPrefix(p.Text, p.ConversationKey) {
		t.Errorf("key of %d bytes, want the first %d bytes of the text", len(p.ConversationKey), KeyBytes)
	}
	p = mustParse(t, []byte(`{"messages":[{"role":"system","content":"only a system prompt"}]}`))
	if !bytes.Equal(p.ConversationKey, p.Text) {
		t.Errorf("short prompt without user message: key %q, want the whole text %q", p.ConversationKey, p.Text)
	}
}

func TestAppendToConversationKeyLeavesTextAlone(t *testing.T) {
	p := mustParse(t, chatBody(t, [2]string{"user", "q"}, [2]string{"assistant", "a"}))
	key := bytes.Clone(p.ConversationKey)
	_ = append(p.ConversationKey, "tail"...)
	if !bytes.Equal(p.Text[:len(key)], key) || !bytes.Equal(p.ConversationKey, key) {
		t.Error("appending to ConversationKey changed Text")
	}
}
