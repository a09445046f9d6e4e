package classify

import (
	"encoding/json"
	"fmt"
)

// referenceParsePrompt is ParsePrompt as it was before it read bodies in
// place (commit c549979): json.Unmarshal into values of type any, and
// json.Marshal for canonical JSON. It pins the canonical form that the
// prefix index and the conversation sampler hash.
// referenceBody holds the prompt fields of the chat completions (messages),
// Responses (instructions, input) and completions (prompt) APIs.
type referenceBody struct {
	Messages     any `json:"messages"`
	Instructions any `json:"instructions"`
	Input        any `json:"input"`
	Prompt       any `json:"prompt"`
}

func referenceParsePrompt(body []byte) (Prompt, error) {
	var req referenceBody
	if err := json.Unmarshal(body, &req); err != nil {
		return Prompt{}, fmt.Errorf("%w: body is not a JSON object", ErrNoPrompt)
	}
	e := referenceEncoder{keyEnd: -1}
	var err error
	switch {
	case req.Messages != nil:
		err = e.chat(req.Messages)
	case req.Input != nil:
		err = e.responses(req.Instructions, req.Input)
	case req.Prompt != nil:
		err = e.completions(req.Prompt)
	default:
		return Prompt{}, ErrNoPrompt
	}
	if err != nil {
		return Prompt{}, err
	}
	if e.keyEnd < 0 {
		e.keyEnd = min(len(e.buf), KeyBytes)
	}
	return Prompt{Text: e.buf, ConversationKey: e.buf[:e.keyEnd:e.keyEnd]}, nil
}

func referenceShapeError(field string) error {
	return fmt.Errorf("%w: %s is not of a supported shape", ErrNoPrompt, field)
}

// encoder writes the canonical text and remembers where the conversation key
// ends (-1 until the first user message is complete).
type referenceEncoder struct {
	buf    []byte
	keyEnd int
}

func (e *referenceEncoder) chat(v any) error {
	messages, ok := v.([]any)
	if !ok {
		return referenceShapeError("messages")
	}
	for _, item := range messages {
		m, ok := item.(map[string]any)
		if !ok && item != nil {
			return referenceShapeError("messages")
		}
		role, _ := m["role"].(string)
		e.message(role, m["content"])
		if calls := m["tool_calls"]; calls != nil {
			e.value(calls)
		}
		e.endOf(role)
	}
	return nil
}

func (e *referenceEncoder) responses(instructions, input any) error {
	switch input.(type) {
	case string, []any:
	default:
		return referenceShapeError("input")
	}
	if instructions != nil {
		e.message("instructions", instructions)
	}
	switch v := input.(type) {
	case string:
		e.message(roleUser, v)
		e.endOf(roleUser)
	case []any:
		for _, item := range v {
			e.responseItem(item)
		}
	}
	return nil
}

// responseItem writes an input item: a message when it has a role, else a
// typed item (function_call, function_call_output, ...) as canonical JSON.
func (e *referenceEncoder) responseItem(item any) {
	m, ok := item.(map[string]any)
	if !ok {
		e.typed("", item)
		return
	}
	role, ok := m["role"].(string)
	if !ok {
		kind, _ := m["type"].(string)
		e.typed(kind, m)
		return
	}
	e.message(role, m["content"])
	e.endOf(role)
}

func (e *referenceEncoder) completions(v any) error {
	switch v := v.(type) {
	case string:
		e.message("prompt", v)
	case []any:
		if len(v) > 0 {
			if _, tokens := v[0].(float64); tokens {
				e.header(markItem, "prompt")
				e.value(v)
				return nil
			}
		}
		for _, p := range v {
			e.header(markItem, "prompt")
			if text, ok := p.(string); ok {
				e.text(text)
			} else {
				e.value(p)
			}
		}
	default:
		return referenceShapeError("prompt")
	}
	return nil
}

// message writes one message whose content is a string, an array of parts,
// or any other JSON value, written as a single value part.
func (e *referenceEncoder) message(role string, content any) {
	e.header(markItem, role)
	switch c := content.(type) {
	case nil:
	case string:
		e.text(c)
	case []any:
		for _, part := range c {
			e.part(part)
		}
	default:
		e.value(c)
	}
}

// part writes a content part: its text when it has one, else its canonical
// JSON.
func (e *referenceEncoder) part(part any) {
	if m, ok := part.(map[string]any); ok {
		if text, ok := m["text"].(string); ok {
			e.text(text)
			return
		}
	}
	if text, ok := part.(string); ok {
		e.text(text)
		return
	}
	e.value(part)
}

func (e *referenceEncoder) typed(kind string, v any) {
	e.header(markTyped, kind)
	e.value(v)
}

func (e *referenceEncoder) header(mark byte, name string) {
	e.buf = append(e.buf, mark)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, markContent)
}

func (e *referenceEncoder) text(s string) {
	e.buf = append(e.buf, markText)
	e.buf = append(e.buf, s...)
}

// value writes v as JSON with sorted keys; v comes from json.Unmarshal, so
// marshalling it cannot fail.
func (e *referenceEncoder) value(v any) {
	b, _ := json.Marshal(v)
	e.buf = append(e.buf, markValue)
	e.buf = append(e.buf, b...)
}

// endOf closes a message with the given role: the conversation key ends
// after the first user message.
func (e *referenceEncoder) endOf(role string) {
	if role == roleUser && e.keyEnd < 0 {
		e.keyEnd = len(e.buf)
	}
}
