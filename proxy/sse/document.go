package sse

import "github.com/kestrelops/tandem/proxy/internal/jsonlex"

// document reads a non-streaming JSON body fed in chunks split anywhere,
// without keeping it. It checks that the body is what encoding/json.Valid
// accepts, follows the path to each value the meter reads (what chatChunk
// and responseSummary hold) and copies of those values only what fits in
// fixed buffers. Its size does not depend on the body's: about 2.6 KiB, half
// of it one bit for each level of nesting encoding/json allows.
type document struct {
	responses bool // a Responses API object, else chat or completions
	state     docState
	field     field // what the value about to be read is to the meter

	depth  int                                 // containers open
	arrays [(maxNestingDepth + 63) / 64]uint64 // bit d set: the container at depth d+1 is an array
	path   [maxPathDepth]node                  // the containers at depth 1 to maxPathDepth

	key      [maxKeyBytes]byte // the member name being read, unescaped
	keyLen   int               // above maxKeyBytes when the name matches nothing the meter reads
	inKey    bool              // the string being read is a member name
	nonEmpty bool              // the string being read has a character
	capture  *scalar           // where the string being read is copied, or nil
	hex      int               // the \u escape being read
	hexLen   int               // its digits read so far
	literal  string            // the true, false or null being read
	literalN int               // its bytes read so far
	count    int               // the count being read, when isCount
	isCount  bool              // the number being read is a usage count so far

	// What the document says, valid only once it is complete.
	output    bool // chat: a choice has output; Responses: the last output has items
	failed    bool // an error object, or "object":"error"
	usage     usageCounts
	finish    scalar // chat: the last string finish_reason; Responses: the last status
	hasFinish bool   // chat: a string finish_reason was read
	reason    scalar // Responses: the last incomplete_details.reason
	object    scalar // chat: the "object" being read
}

// maxPathDepth is the depth of the deepest container the meter looks into:
// choices[].message.tool_calls is the fifth level. Deeper containers hold
// nothing it reads.
const maxPathDepth = 5

// maxKeyBytes bounds the member names the document unescapes; the longest
// it looks for is "prompt_tokens_details".
const maxKeyBytes = 32

// scalar is a bounded copy of a JSON string as written, quotes and escapes
// included: the whole string when it fits, else its first bytes, which is
// enough for finishReason to tell it is too long.
type scalar struct {
	b [maxQuotedFinishReason + 1]byte
	n int
}

func (s *scalar) reset()       { s.n = 0 }
func (s *scalar) add(p []byte) { s.n += copy(s.b[s.n:], p) }
func (s *scalar) raw() []byte  { return s.b[:s.n] }
func (s *scalar) addByte(c byte) {
	if s.n < len(s.b) {
		s.b[s.n] = c
		s.n++
	}
}

// whole reports whether s holds all of its string.
func (s *scalar) whole() bool { return s.n < len(s.b) }

// docState is what a document expects next.
type docState uint8

const (
	docValue          docState = iota // a value
	docFirstElement                   // after '[': a value or ']'
	docFirstKey                       // after '{': a member name or '}'
	docKey                            // after ',' in an object: a member name
	docColon                          // after a member name
	docAfterValue                     // after a value in a container: ',' or its closing byte
	docEnd                            // after the top-level value: only space
	docString                         // in a string
	docEscape                         // after a backslash in a string
	docUnicode                        // in the hex digits of \u
	docMinus                          // after a number's '-'
	docZero                           // after a number's leading 0
	docInt                            // in a number's integer digits
	docDot                            // after a number's '.'
	docFraction                       // in a number's fraction digits
	docExponent                       // after a number's 'e' or 'E'
	docExponentSign                   // after the exponent's sign
	docExponentDigits                 // in the exponent's digits
	docLiteral                        // in true, false or null
	docInvalid                        // not JSON, whatever follows
)

// node is a container the meter looks into.
type node uint8

const (
	nodeOther        node = iota // nothing the meter reads
	nodeRoot                     // the top-level object
	nodeChoices                  // choices
	nodeChoice                   // an element of choices
	nodeMessage                  // choices[].message or choices[].delta
	nodeToolCalls                // choices[].message.tool_calls
	nodeUsage                    // usage
	nodeUsageDetails             // usage.prompt_tokens_details or input_tokens_details
	nodeIncomplete               // incomplete_details
	nodeOutput                   // a Responses output
)

// field is a value by what the meter does with it.
type field uint8

const (
	fieldOther        field = iota
	fieldRoot               // the top-level value
	fieldChoices            // choices
	fieldChoice             // an element of choices
	fieldMessage            // message or delta of a choice
	fieldToolCalls          // tool_calls of a message
	fieldText               // content or reasoning of a message, text of a choice
	fieldFinish             // finish_reason of a choice
	fieldObject             // chat "object"
	fieldError              // the top-level "error"
	fieldUsage              // usage
	fieldUsageDetails       // prompt_tokens_details or input_tokens_details
	fieldOutputTokens       // completion_tokens or output_tokens
	fieldPromptTokens       // prompt_tokens or input_tokens
	fieldCachedTokens       // cached_tokens
	fieldStatus             // Responses status
	fieldIncomplete         // Responses incomplete_details
	fieldReason             // incomplete_details.reason
	fieldOutput             // Responses output
)

// objectNodes and arrayNodes name the container a field's value opens.
var (
	objectNodes = [...]node{fieldRoot: nodeRoot, fieldChoice: nodeChoice, fieldMessage: nodeMessage,
		fieldUsage: nodeUsage, fieldUsageDetails: nodeUsageDetails, fieldIncomplete: nodeIncomplete}
	arrayNodes = [...]node{fieldChoices: nodeChoices, fieldToolCalls: nodeToolCalls, fieldOutput: nodeOutput}
)

func newDocument(api API) *document {
	return &document{responses: api == APIResponses, field: fieldRoot}
}

// complete reports whether the body so far is one valid JSON value.
func (d *document) complete() bool {
	switch d.state {
	case docEnd:
		return true
	case docZero, docInt, docFraction, docExponentDigits:
		return d.depth == 0 // a top-level number ends with the body
	}
	return false
}

// chatChunk is what a complete chat or completions document says.
func (d *document) chatChunk() chatChunk {
	c := chatChunk{output: d.output, usage: d.usage, failed: d.failed}
	if d.hasFinish {
		c.finish = d.finish.raw()
	}
	return c
}

// response is what a complete Responses API document says.
func (d *document) response() responseSummary {
	return responseSummary{status: d.finish.raw(), reason: d.reason.raw(), usage: d.usage, output: d.output, failed: d.failed}
}

// feed reads the next chunk of the body.
func (d *document) feed(b []byte) {
	for i := 0; i < len(b) && d.state != docInvalid; i++ {
		if d.state == docString {
			j := jsonlex.PlainEnd(b, i)
			d.plain(b[i:j])
			if i = j; i == len(b) {
				return
			}
		}
		d.step(b[i])
	}
}

// plain reads bytes of a string that stand for themselves.
func (d *document) plain(p []byte) {
	if len(p) == 0 {
		return
	}
	d.nonEmpty = true
	switch {
	case d.inKey && d.keyLen <= maxKeyBytes:
		if n := copy(d.key[d.keyLen:], p); n < len(p) {
			d.keyLen = maxKeyBytes + 1
		} else {
			d.keyLen += n
		}
	case d.capture != nil:
		d.capture.add(p)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// step reads one byte.
func (d *document) step(c byte) {
	switch d.state {
	case docValue:
		if !isSpace(c) {
			d.beginValue(c)
		}
	case docFirstElement:
		switch {
		case isSpace(c):
		case c == ']':
			d.close(true)
		default:
			switch d.top() {
			case nodeToolCalls, nodeOutput:
				d.output = true
			}
			d.field = d.elementField()
			d.beginValue(c)
		}
	case docFirstKey, docKey:
		switch {
		case isSpace(c):
		case c == '"':
			d.beginKey()
		case c == '}' && d.state == docFirstKey:
			d.close(false)
		default:
			d.state = docInvalid
		}
	case docColon:
		switch {
		case isSpace(c):
		case c == ':':
			d.field = d.memberField()
			d.state = docValue
		default:
			d.state = docInvalid
		}
	case docAfterValue:
		switch {
		case isSpace(c):
		case c == ',' && d.inArray():
			d.field = d.elementField()
			d.state = docValue
		case c == ',':
			d.state = docKey
		case c == ']' || c == '}':
			d.close(c == ']')
		default:
			d.state = docInvalid
		}
	case docEnd:
		if !isSpace(c) {
			d.state = docInvalid
		}
	case docString:
		switch c {
		case '"':
			d.endString()
		case '\\':
			d.nonEmpty = true
			d.escapeByte(c)
			d.state = docEscape
		default: // a control character
			d.state = docInvalid
		}
	case docEscape:
		d.escape(c)
	case docUnicode:
		d.unicode(c)
	case docMinus:
		switch {
		case c == '0':
			d.state = docZero
		case isDigit(c):
			d.state = docInt
		default:
			d.state = docInvalid
		}
	case docZero, docInt, docFraction, docExponentDigits:
		d.number(c)
	case docDot:
		if !isDigit(c) {
			d.state = docInvalid
			return
		}
		d.state = docFraction
	case docExponent:
		switch {
		case c == '+' || c == '-':
			d.state = docExponentSign
		case isDigit(c):
			d.state = docExponentDigits
		default:
			d.state = docInvalid
		}
	case docExponentSign:
		if !isDigit(c) {
			d.state = docInvalid
			return
		}
		d.state = docExponentDigits
	case docLiteral:
		if c != d.literal[d.literalN] {
			d.state = docInvalid
			return
		}
		if d.literalN++; d.literalN == len(d.literal) {
			d.endValue()
		}
	}
}

// beginValue reads the first byte of a value of d.field.
func (d *document) beginValue(c byte) {
	switch d.field {
	case fieldStatus:
		d.finish.reset() // any value replaces the last status
	case fieldReason:
		d.reason.reset()
	case fieldOutput:
		d.output = false
	}
	switch c {
	case '{', '[':
		d.open(c == '[')
	case '"':
		d.inKey, d.nonEmpty = false, false
		d.capture = d.captureOf(d.field)
		if d.capture != nil {
			d.capture.reset()
			d.capture.addByte('"')
		}
		d.state = docString
	case '-':
		d.isCount = false
		d.state = docMinus
	case '0':
		d.beginCount(c)
		d.state = docZero
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		d.beginCount(c)
		d.state = docInt
	case 't':
		d.literal, d.literalN, d.state = "true", 1, docLiteral
	case 'f':
		d.literal, d.literalN, d.state = "false", 1, docLiteral
	case 'n':
		d.literal, d.literalN, d.state = "null", 1, docLiteral
	default:
		d.state = docInvalid
	}
}

// captureOf returns where a string value of f is copied, or nil.
func (d *document) captureOf(f field) *scalar {
	switch f {
	case fieldFinish:
		d.hasFinish = true
		return &d.finish
	case fieldStatus:
		return &d.finish
	case fieldReason:
		return &d.reason
	case fieldObject:
		return &d.object
	}
	return nil
}

func (d *document) beginCount(first byte) {
	switch d.field {
	case fieldOutputTokens, fieldPromptTokens, fieldCachedTokens:
		d.isCount, d.count = true, addDigit(0, first)
	default:
		d.isCount = false
	}
}

// number reads a byte after a digit of a number.
func (d *document) number(c byte) {
	switch {
	case isDigit(c) && d.state != docZero:
		if d.isCount {
			d.count = addDigit(d.count, c)
		}
	case c == '.' && (d.state == docZero || d.state == docInt):
		d.isCount = false
		d.state = docDot
	case (c == 'e' || c == 'E') && d.state != docExponentDigits:
		d.isCount = false
		d.state = docExponent
	default:
		d.endCount()
		d.endValue()
		d.step(c)
	}
}

func (d *document) endCount() {
	if !d.isCount {
		return
	}
	d.isCount = false
	u := &d.usage
	switch d.field {
	case fieldOutputTokens:
		u.output, u.hasOutput = d.count, true
	case fieldPromptTokens:
		u.prompt, u.hasPrompt = d.count, true
	case fieldCachedTokens:
		u.cached, u.hasCached = d.count, true
	}
}

func (d *document) beginKey() {
	d.inKey, d.nonEmpty, d.keyLen = true, false, 0
	if d.top() == nodeOther {
		d.keyLen = maxKeyBytes + 1
	}
	d.state = docString
}

// keyByte adds an unescaped byte to the member name being read.
func (d *document) keyByte(c byte) {
	if d.keyLen < maxKeyBytes {
		d.key[d.keyLen] = c
		d.keyLen++
		return
	}
	d.keyLen = maxKeyBytes + 1
}

// escapeByte copies a byte of an escape sequence into a captured string.
func (d *document) escapeByte(c byte) {
	if !d.inKey && d.capture != nil {
		d.capture.addByte(c)
	}
}

// escape reads the byte after a backslash.
func (d *document) escape(c byte) {
	var unescaped byte
	switch c {
	case '"', '\\', '/':
		unescaped = c
	case 'b':
		unescaped = '\b'
	case 'f':
		unescaped = '\f'
	case 'n':
		unescaped = '\n'
	case 'r':
		unescaped = '\r'
	case 't':
		unescaped = '\t'
	case 'u':
		d.escapeByte(c)
		d.hex, d.hexLen = 0, 0
		d.state = docUnicode
		return
	default:
		d.state = docInvalid
		return
	}
	d.escapeByte(c)
	if d.inKey {
		d.keyByte(unescaped)
	}
	d.state = docString
}

// unicode reads a hex digit of a \u escape. A member name with a non-ASCII
// escape matches none the meter looks for.
func (d *document) unicode(c byte) {
	var v byte
	switch {
	case isDigit(c):
		v = c - '0'
	case 'a' <= c && c <= 'f':
		v = c - 'a' + 10
	case 'A' <= c && c <= 'F':
		v = c - 'A' + 10
	default:
		d.state = docInvalid
		return
	}
	d.escapeByte(c)
	d.hex = d.hex<<4 | int(v)
	if d.hexLen++; d.hexLen < 4 {
		return
	}
	if d.inKey {
		if d.hex < 0x80 {
			d.keyByte(byte(d.hex))
		} else {
			d.keyLen = maxKeyBytes + 1
		}
	}
	d.state = docString
}

func (d *document) endString() {
	if d.inKey {
		d.inKey = false
		d.state = docColon
		return
	}
	if d.capture != nil {
		d.capture.addByte('"')
		d.capture = nil
	}
	switch d.field {
	case fieldText:
		if d.nonEmpty {
			d.output = true
		}
	case fieldObject:
		if d.object.whole() && stringIs(d.object.raw(), "error") {
			d.failed = true
		}
	}
	d.endValue()
}

func (d *document) open(array bool) {
	if d.depth == maxNestingDepth {
		d.state = docInvalid
		return
	}
	word, bit := d.depth/64, uint64(1)<<(d.depth%64)
	n := nodeOther
	if array {
		d.arrays[word] |= bit
		if int(d.field) < len(arrayNodes) {
			n = arrayNodes[d.field]
		}
		d.state = docFirstElement
	} else {
		d.arrays[word] &^= bit
		if int(d.field) < len(objectNodes) {
			n = objectNodes[d.field]
		}
		if d.field == fieldError {
			d.failed = true
		}
		d.state = docFirstKey
	}
	d.depth++
	if d.depth <= maxPathDepth {
		d.path[d.depth-1] = n
	}
}

func (d *document) close(array bool) {
	if d.inArray() != array {
		d.state = docInvalid
		return
	}
	d.depth--
	d.endValue()
}

func (d *document) endValue() {
	if d.depth == 0 {
		d.state = docEnd
		return
	}
	d.state = docAfterValue
}

// inArray reports whether the innermost open container is an array.
func (d *document) inArray() bool {
	i := d.depth - 1
	return d.arrays[i/64]&(1<<(i%64)) != 0
}

// top returns the innermost open container.
func (d *document) top() node {
	if d.depth == 0 || d.depth > maxPathDepth {
		return nodeOther
	}
	return d.path[d.depth-1]
}

func (d *document) elementField() field {
	if d.top() == nodeChoices {
		return fieldChoice
	}
	return fieldOther
}

// memberField returns the field of the value of the member just named.
func (d *document) memberField() field {
	if d.keyLen > maxKeyBytes {
		return fieldOther
	}
	key := d.key[:d.keyLen]
	usage := chatUsage
	if d.responses {
		usage = responsesUsage
	}
	switch d.top() {
	case nodeRoot:
		if d.responses {
			switch string(key) {
			case "status":
				return fieldStatus
			case "incomplete_details":
				return fieldIncomplete
			case "usage":
				return fieldUsage
			case "output":
				return fieldOutput
			case "error":
				return fieldError
			}
			return fieldOther
		}
		switch string(key) {
		case "choices":
			return fieldChoices
		case "usage":
			return fieldUsage
		case "error":
			return fieldError
		case "object":
			return fieldObject
		}
	case nodeChoice:
		switch string(key) {
		case "delta", "message":
			return fieldMessage
		case "text":
			return fieldText
		case "finish_reason":
			return fieldFinish
		}
	case nodeMessage:
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			return fieldText
		case "tool_calls":
			return fieldToolCalls
		}
	case nodeUsage:
		switch string(key) {
		case usage.output:
			return fieldOutputTokens
		case usage.prompt:
			return fieldPromptTokens
		case usage.promptDetails:
			return fieldUsageDetails
		}
	case nodeUsageDetails:
		if string(key) == "cached_tokens" {
			return fieldCachedTokens
		}
	case nodeIncomplete:
		if string(key) == "reason" {
			return fieldReason
		}
	}
	return fieldOther
}

// writeDocument feeds a chunk of a non-streaming body to its document.
func (m *Meter) writeDocument(p []byte) {
	if m.doc == nil {
		m.doc = newDocument(m.api)
	}
	m.doc.feed(p)
	m.settled = false
}

// settle brings res up to date with a non-streaming body: what its
// document says once complete, nothing before.
func (m *Meter) settle() {
	if m.streaming || m.settled {
		return
	}
	m.settled = true
	m.res = result{}
	if m.doc == nil || !m.doc.complete() {
		return
	}
	var output bool
	if m.api == APIResponses {
		s := m.doc.response()
		m.applyResponse(s)
		output = s.output
	} else {
		c := m.doc.chatChunk()
		m.applyChat(c)
		output = c.output
	}
	m.res.ended = true
	if output {
		m.res.frames = 1
	}
}
