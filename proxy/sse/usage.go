package sse

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
// holds as something other than a non-negative integer, are left alone.
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
