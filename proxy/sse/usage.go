package sse

// maxPlausibleTokens bounds the usage counts a Meter believes. No model's
// context window comes near ten million tokens, so a request that reports
// more output, prompt or cached tokens is reporting a fault (or an upstream
// lying), and its counts would swamp every counter and rate they reach.
const maxPlausibleTokens = 10_000_000

// usageCounts is one usage report: the counts it holds.
type usageCounts struct {
	output, prompt, cached          int
	hasOutput, hasPrompt, hasCached bool
}

type usageKeys struct{ output, prompt, promptDetails string }

var (
	chatUsage      = usageKeys{"completion_tokens", "prompt_tokens", "prompt_tokens_details"}
	responsesUsage = usageKeys{"output_tokens", "input_tokens", "input_tokens_details"}
)

// read reads a usage object named by keys; counts it does not hold, or
// holds as anything but a count, are left alone.
func (u *usageCounts) read(r *reader, keys usageKeys) {
	r.object(func(key []byte) bool {
		switch string(key) {
		case keys.output:
			if n, ok := count(r.value()); ok {
				u.output, u.hasOutput = n, true
			}
		case keys.prompt:
			if n, ok := count(r.value()); ok {
				u.prompt, u.hasPrompt = n, true
			}
		case keys.promptDetails:
			r.object(func(key []byte) bool {
				if string(key) != "cached_tokens" {
					return false
				}
				if n, ok := count(r.value()); ok {
					u.cached, u.hasCached = n, true
				}
				return true
			})
		default:
			return false
		}
		return true
	})
}

func (m *Meter) applyUsage(u usageCounts) {
	if u.hasOutput {
		m.res.outputTokens, m.res.outputReported = u.output, true
	}
	if u.hasPrompt {
		m.res.promptTokens = u.prompt
	}
	if u.hasCached {
		m.res.cachedTokens = u.cached
	}
}

// count parses v as a token count: a JSON number written as a non-negative
// integer, digits only. 1e3, 1.0, -1 and "1" are not counts (JSON itself
// rules out leading zeros and 0x). A count above maxPlausibleTokens is
// returned as some value above it, however many digits it has.
func count(v []byte) (int, bool) {
	if len(v) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = addDigit(n, c)
	}
	return n, true
}

// addDigit appends the decimal digit c to n, saturating above
// maxPlausibleTokens so that n never overflows.
func addDigit(n int, c byte) int {
	if n > maxPlausibleTokens {
		return n
	}
	return n*10 + int(c-'0')
}

// plausibleUsage reports whether the usage counts the server reported could
// be true: none above maxPlausibleTokens, and no more cached tokens than
// prompt tokens. Counts never reported are zero.
func (r *result) plausibleUsage() bool {
	return r.outputTokens <= maxPlausibleTokens && r.promptTokens <= maxPlausibleTokens &&
		r.cachedTokens <= r.promptTokens
}
