// Package record writes and reads tandem's per-request records: one JSON line
// per measured request, the individual timings the report computes exact
// quantiles from. Records never hold prompt or output text.
package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// Record is one measured request on one config. All timings start when tandem
// handed the request to the upstream's transport (Start).
type Record struct {
	Start  time.Time `json:"time"`
	Config string    `json:"config"`
	Class  string    `json:"class"`
	// PairID joins the A and B records of one mirrored request; empty for
	// production.
	PairID             string  `json:"pair_id,omitempty"`
	Outcome            string  `json:"outcome"`
	FirstToken         bool    `json:"first_token"`
	TTFTSeconds        float64 `json:"ttft_seconds"`
	LastTokenSeconds   float64 `json:"last_token_seconds"`
	DurationSeconds    float64 `json:"duration_seconds"`
	OutputTokens       int     `json:"output_tokens"`
	TokensEstimated    bool    `json:"tokens_estimated,omitempty"`
	PromptTokens       int     `json:"prompt_tokens"`
	CachedPromptTokens int     `json:"cached_prompt_tokens"`
	FinishReason       string  `json:"finish_reason,omitempty"`
}

// New builds the record of one observation.
func New(start time.Time, config, class, pairID string, o exporter.Observation) Record {
	return Record{
		Start:              start.UTC(),
		Config:             config,
		Class:              class,
		PairID:             pairID,
		Outcome:            o.Outcome,
		FirstToken:         o.FirstToken,
		TTFTSeconds:        o.TTFT.Seconds(),
		LastTokenSeconds:   o.LastToken.Seconds(),
		DurationSeconds:    o.Duration.Seconds(),
		OutputTokens:       o.OutputTokens,
		TokensEstimated:    o.TokensEstimated,
		PromptTokens:       o.PromptTokens,
		CachedPromptTokens: o.CachedPromptTokens,
		FinishReason:       o.FinishReason,
	}
}

// End is the time the response body ended.
func (r Record) End() time.Time {
	return r.Start.Add(time.Duration(r.DurationSeconds * float64(time.Second)))
}

// OutputSpeed is the per-request output speed, output tokens per second of
// one stream after its first token: (tokens - 1) / (last - first output
// frame). It reports false when it is undefined.
func (r Record) OutputSpeed() (float64, bool) {
	span := r.LastTokenSeconds - r.TTFTSeconds
	if r.Outcome != exporter.OutcomeCompleted || !r.FirstToken || r.OutputTokens < 2 || span <= 0 {
		return 0, false
	}
	return float64(r.OutputTokens-1) / span, true
}

// Read decodes records from r. Blank lines are skipped; a malformed line is an
// error naming its line number.
func Read(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 1
	for ; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line, err)
	}
	return out, nil
}

// ReadFiles reads and concatenates the records of every file.
func ReadFiles(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		recs, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}
