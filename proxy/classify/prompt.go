package classify

import (
	"errors"
	"fmt"
	"math"

	"github.com/kestrelops/tandem/proxy/internal/jsonlex"
)

// Prompt is the canonical form of one request's prompt.
type Prompt struct {
	// Text is the canonical prompt text described in the package doc.
	Text []byte
	// ConversationKey identifies the conversation the request belongs to and
	// is a prefix of Text, sharing its memory: the messages up to and
	// including the first user message, or the first KeyBytes of Text when
	// there is none.
	ConversationKey []byte
}

// KeyBytes bounds the conversation key of a prompt without a user message.
const KeyBytes = 1024

// maxBodyBytes bounds the bodies ParsePrompt reads, so that offsets into
// them fit an int32.
const maxBodyBytes = math.MaxInt32

// ErrNoPrompt is returned for a body without messages, input or prompt of a
// supported shape.
var ErrNoPrompt = errors.New("classify: no messages, input or prompt of a supported shape")

const (
	markItem    = 0xFF
	markContent = 0xFE
	markText    = 0xFD
	markValue   = 0xFC
	markTyped   = 0xFB
)

const roleUser = "user"

// fields holds the prompt fields of a body: chat completions (messages),
// Responses (instructions, input) and completions (prompt). Each is the raw
// JSON value of the field's last member, nil when it is missing or null.
type fields struct {
	messages, instructions, input, prompt []byte
}

// field returns the field a member key names, matched as json.Unmarshal
// matches struct fields (case-insensitively), or nil.
func (f *fields) field(key []byte) *[]byte {
	switch {
	case foldsTo(key, "messages"):
		return &f.messages
	case foldsTo(key, "instructions"):
		return &f.instructions
	case foldsTo(key, "input"):
		return &f.input
	case foldsTo(key, "prompt"):
		return &f.prompt
	}
	return nil
}

// readFields validates body as json.Unmarshal into a struct of the four
// fields, typed any, would: one JSON object, its prompt fields decodable.
// It reports false for anything else.
func readFields(body []byte) (f fields, ok bool) {
	var v validator
	i := jsonlex.SkipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return f, false
	}
	if i = jsonlex.SkipSpace(body, i+1); i < len(body) && body[i] == '}' {
		return f, jsonlex.SkipSpace(body, i+1) == len(body)
	}
	for {
		colon := jsonlex.MemberValue(body, i)
		if colon < 0 {
			return f, false
		}
		field := f.field(body[i:jsonlex.StringEnd(body, i)])
		start := jsonlex.SkipSpace(body, colon)
		end := v.valueEnd(body, start, 1, field != nil)
		if end < 0 {
			return f, false
		}
		if field != nil {
			*field = body[start:end]
			if isNull(*field) {
				*field = nil
			}
		}
		if i = jsonlex.SkipSpace(body, end); i == len(body) {
			return f, false
		}
		switch body[i] {
		case '}':
			return f, jsonlex.SkipSpace(body, i+1) == len(body)
		case ',':
			i = jsonlex.SkipSpace(body, i+1)
		default:
			return f, false
		}
	}
}

// ParsePrompt extracts the canonical prompt and conversation key from a
// request body (already known to be a JSON object). The error wraps
// ErrNoPrompt when the body has no prompt fields of the expected shape; it
// never quotes the body. When a body has several prompt fields, messages wins
// over input, and input over prompt.
//
// It reads the body where it lies, decoding nothing into Go values: it
// validates the whole body, then reads the prompt fields twice, to size the
// text and to write it. It allocates the text and, for objects written as
// canonical JSON, the order of their keys; the rest of the body costs
// nothing, however large or deep.
func ParsePrompt(body []byte) (Prompt, error) {
	if len(body) > maxBodyBytes {
		return Prompt{}, fmt.Errorf("%w: body is over 2 GiB", ErrNoPrompt)
	}
	f, ok := readFields(body)
	if !ok {
		return Prompt{}, fmt.Errorf("%w: body is not a JSON object", ErrNoPrompt)
	}
	if f.messages == nil && f.input == nil && f.prompt == nil {
		return Prompt{}, ErrNoPrompt
	}
	e := encoder{sizing: true}
	if err := e.prompt(f); err != nil {
		return Prompt{}, err
	}
	e = encoder{buf: make([]byte, 0, e.size), keyEnd: -1}
	e.prompt(f) // sizing found any shape error
	if e.keyEnd < 0 {
		e.keyEnd = min(len(e.buf), KeyBytes)
	}
	return Prompt{Text: e.buf, ConversationKey: e.buf[:e.keyEnd:e.keyEnd]}, nil
}

func shapeError(field string) error {
	return fmt.Errorf("%w: %s is not of a supported shape", ErrNoPrompt, field)
}

// encoder writes the canonical text and remembers where the conversation key
// ends (-1 until the first user message is complete). When sizing, it
// writes nothing and adds up a close upper bound of the text's length: the
// length of the raw JSON of what it would write.
type encoder struct {
	sizing    bool
	size      int
	buf       []byte
	keyEnd    int
	canonical canonical
}

// Roles and kinds of the canonical text, as the JSON strings they are read
// from.
var (
	noName           = []byte(`""`)
	nameUser         = []byte(`"user"`)
	nameInstructions = []byte(`"instructions"`)
	namePrompt       = []byte(`"prompt"`)
)

func (e *encoder) prompt(f fields) error {
	switch {
	case f.messages != nil:
		return e.chat(f.messages)
	case f.input != nil:
		return e.responses(f.instructions, f.input)
	default:
		return e.completions(f.prompt)
	}
}

func (e *encoder) chat(v []byte) error {
	if v[0] != '[' {
		return shapeError("messages")
	}
	for item := range elements(v) {
		var role, content, calls []byte
		switch item[0] {
		case 'n': // a message without role or content
		case '{':
			for key, value := range members(item) {
				switch {
				case stringIs(key, "role"):
					role = value
				case stringIs(key, "content"):
					content = value
				case stringIs(key, "tool_calls"):
					calls = value
				}
			}
		default:
			return shapeError("messages")
		}
		e.message(role, content)
		if calls != nil && !isNull(calls) {
			e.value(calls)
		}
		e.endOf(role)
	}
	return nil
}

func (e *encoder) responses(instructions, input []byte) error {
	if !isString(input) && input[0] != '[' {
		return shapeError("input")
	}
	if instructions != nil {
		e.message(nameInstructions, instructions)
	}
	if isString(input) {
		e.message(nameUser, input)
		e.endOf(nameUser)
		return nil
	}
	for item := range elements(input) {
		e.responseItem(item)
	}
	return nil
}

// responseItem writes an input item: a message when it has a role, else a
// typed item (function_call, function_call_output, ...) as canonical JSON.
func (e *encoder) responseItem(item []byte) {
	if item[0] != '{' {
		e.typed(noName, item)
		return
	}
	var role, kind, content []byte
	for key, value := range members(item) {
		switch {
		case stringIs(key, "role"):
			role = value
		case stringIs(key, "type"):
			kind = value
		case stringIs(key, "content"):
			content = value
		}
	}
	if !isString(role) {
		e.typed(kind, item)
		return
	}
	e.message(role, content)
	e.endOf(role)
}

func (e *encoder) completions(v []byte) error {
	switch {
	case isString(v):
		e.message(namePrompt, v)
	case v[0] == '[':
		if isNumber(v[jsonlex.SkipSpace(v, 1):]) { // token IDs
			e.header(markItem, namePrompt)
			e.value(v)
			return nil
		}
		for p := range elements(v) {
			e.header(markItem, namePrompt)
			if isString(p) {
				e.text(p)
			} else {
				e.value(p)
			}
		}
	default:
		return shapeError("prompt")
	}
	return nil
}

// message writes one message whose content is a string, an array of parts,
// or any other JSON value, written as a single value part. A role that is
// not a string is written empty.
func (e *encoder) message(role, content []byte) {
	e.header(markItem, role)
	switch {
	case content == nil || isNull(content):
	case isString(content):
		e.text(content)
	case content[0] == '[':
		for part := range elements(content) {
			e.part(part)
		}
	default:
		e.value(content)
	}
}

// part writes a content part: its text when it has one, else its canonical
// JSON.
func (e *encoder) part(part []byte) {
	if part[0] == '{' {
		var text []byte
		for key, value := range members(part) {
			if stringIs(key, "text") {
				text = value
			}
		}
		if isString(text) {
			e.text(text)
			return
		}
	}
	if isString(part) {
		e.text(part)
		return
	}
	e.value(part)
}

func (e *encoder) typed(kind, v []byte) {
	e.header(markTyped, kind)
	e.value(v)
}

// header writes mark, name (a JSON value, written empty when not a string)
// and the content mark.
func (e *encoder) header(mark byte, name []byte) {
	if !isString(name) {
		name = noName
	}
	if e.sizing {
		e.size += len(name)
		return
	}
	e.buf = append(e.buf, mark)
	e.buf = appendText(e.buf, name)
	e.buf = append(e.buf, markContent)
}

// text writes the JSON string s as a text part.
func (e *encoder) text(s []byte) {
	if e.sizing {
		e.size += len(s) - 1
		return
	}
	e.buf = append(e.buf, markText)
	e.buf = appendText(e.buf, s)
}

// value writes the JSON value v as a value part in canonical JSON.
func (e *encoder) value(v []byte) {
	if e.sizing {
		e.size += 1 + len(v)
		return
	}
	e.buf = append(e.buf, markValue)
	e.buf = e.canonical.appendValue(e.buf, v)
}

// endOf closes a message with the given role: the conversation key ends
// after the first user message.
func (e *encoder) endOf(role []byte) {
	if e.keyEnd < 0 && !e.sizing && stringIs(role, roleUser) {
		e.keyEnd = len(e.buf)
	}
}
