// Package sse observes OpenAI-compatible response bodies as they pass through
// the proxy and measures them: time to first output frame, time to last
// output frame, output, prompt and cached tokens, the finish reason, and
// whether the body ended properly or reported an error.
//
// A [Parser] splits a text/event-stream body into events incrementally, per
// the WHATWG event-stream rules, whatever the chunk boundaries. A [Meter]
// feeds a response body to a Parser (or, for a non-streaming response, reads
// the JSON document as it passes, keeping none of it) and turns what it sees
// into an [exporter.Observation]. Neither ever buffers a body before it is
// forwarded: the proxy hands each chunk to the Meter after reading it.
package sse
