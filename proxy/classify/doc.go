// Package classify decides, before a request is dispatched, which workload
// class it belongs to and whether it is mirrored.
//
// ParsePrompt turns the JSON body of a chat completions, completions or
// Responses request into a canonical prompt text. The encoding is
// unambiguous and preserves prefixes: every message is written as
//
//	0xFF role 0xFE part...
//
// where each part is 0xFD followed by text, or 0xFC followed by the canonical
// JSON of a part that carries no text, such as an image or a tool call. A
// Responses item without a role is written as 0xFB type 0xFE followed by its
// canonical JSON as one part. Canonical JSON is what encoding/json's Marshal
// writes for the value its Unmarshal decodes into an any: no spaces, object
// keys sorted and only the last of equal keys kept, numbers as float64,
// strings escaped anew (<, > and & too). Text decoded from JSON is valid
// UTF-8, in which the bytes 0xF8 to 0xFF never occur, so the markers cannot
// be forged by content, and a message list that extends another has a
// canonical text that extends the other's.
//
// ParsePrompt reads the body where it lies, without decoding it into Go
// values, so that a client cannot make it allocate more than the prompt it
// keeps: the canonical text and, for the objects it writes as canonical
// JSON, the order of their keys (16 bytes an object, 4 a key). The fields it
// ignores cost no allocation, and nesting costs no recursion.
//
// An Index keeps the chained hashes of recently seen prompt prefixes, as an
// inference engine's prefix cache does, and classifies a prompt as
// exporter.ClassRepeatedPrefix when enough of it was seen before.
//
// A Sampler picks the mirrored requests, either whole conversations by a hash
// of the conversation key, so that separate tandem replicas agree, or single
// requests at random.
//
// Prompt text is never logged by this package and must not be logged by its
// callers.
package classify
