// Package record writes and reads tandem's per-request records: one JSON line
// per measured request, the individual timings the report computes exact
// quantiles from. Records never hold prompt or output text.
package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
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
	// Mirror says, on a production record when tandem mirrors, what became
	// of the request on the arms: MirrorMirrored, MirrorNotSampled, or
	// Skipped(reason) when it was sampled but not mirrored. Empty on the
	// arms' records, without arms, and in files older than the field.
	Mirror string `json:"mirror,omitempty"`
}

// The values of Record.Mirror other than Skipped's.
const (
	MirrorMirrored   = "mirrored"
	MirrorNotSampled = "not_sampled"
)

const skippedPrefix = "skipped:"

// Skipped is the Mirror value of a sampled request not mirrored for reason,
// one of exporter.SkipReasons.
func Skipped(reason string) string { return skippedPrefix + reason }

// SkipReason is the reason of a Skipped Mirror value, and false for any
// other value.
func (r Record) SkipReason() (string, bool) {
	return strings.CutPrefix(r.Mirror, skippedPrefix)
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
		FinishReason:       finishReason(o.FinishReason),
	}
}

// maxFinishReasonBytes bounds the one string of a record an upstream
// chooses freely.
const maxFinishReasonBytes = 64

// FinishReasonOther replaces a finish reason that is not a short token.
const FinishReasonOther = "other"

// finishReason keeps s when it is a token of at most maxFinishReasonBytes
// letters, digits and _.:- (every finish reason the APIs define is one) and
// returns FinishReasonOther otherwise, so that an upstream can neither bloat
// a record nor put text in it.
func finishReason(s string) string {
	if len(s) > maxFinishReasonBytes {
		return FinishReasonOther
	}
	for _, c := range []byte(s) {
		if !isTokenByte(c) {
			return FinishReasonOther
		}
	}
	return s
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

// End is the time the response body ended.
func (r Record) End() time.Time {
	return r.Start.Add(time.Duration(r.DurationSeconds * float64(time.Second)))
}

// Observation is the observation r was built from (New), its timings
// rounded to the nanosecond.
func (r Record) Observation() exporter.Observation {
	return exporter.Observation{
		Outcome:            r.Outcome,
		FirstToken:         r.FirstToken,
		TTFT:               duration(r.TTFTSeconds),
		LastToken:          duration(r.LastTokenSeconds),
		Duration:           duration(r.DurationSeconds),
		OutputTokens:       r.OutputTokens,
		TokensEstimated:    r.TokensEstimated,
		PromptTokens:       r.PromptTokens,
		CachedPromptTokens: r.CachedPromptTokens,
		FinishReason:       r.FinishReason,
	}
}

func duration(seconds float64) time.Duration {
	return time.Duration(math.Round(seconds * float64(time.Second)))
}

// MaxLineBytes is the longest record line Read accepts; a longer one is
// skipped. Records written by tandem stay under 1 KB.
const MaxLineBytes = 1 << 20

// ReadStats counts the lines a read skipped: corrupt (not a JSON record, such
// as the partial last line a crash leaves) or longer than MaxLineBytes.
type ReadStats struct {
	Skipped int
	// FirstSkippedFile and FirstSkippedLine locate the first skipped line;
	// the file is empty from Read.
	FirstSkippedFile string
	FirstSkippedLine int
}

func (s *ReadStats) add(o ReadStats) {
	if s.Skipped == 0 && o.Skipped > 0 {
		s.FirstSkippedFile, s.FirstSkippedLine = o.FirstSkippedFile, o.FirstSkippedLine
	}
	s.Skipped += o.Skipped
}

// Read decodes records from r. Blank lines are ignored; corrupt and overlong
// lines are skipped and counted, and reading goes on. An error comes only
// from reading r.
func Read(r io.Reader) ([]Record, ReadStats, error) {
	var out []Record
	var stats ReadStats
	skip := func(line int) {
		stats.add(ReadStats{Skipped: 1, FirstSkippedLine: line})
	}
	br := bufio.NewReaderSize(r, MaxLineBytes+1)
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			skip(line)
			err = discardLine(br)
		case len(bytes.TrimSpace(b)) == 0:
		default:
			var rec Record
			if json.Unmarshal(b, &rec) != nil {
				skip(line)
			} else {
				out = append(out, rec)
			}
		}
		if err == io.EOF {
			return out, stats, nil
		}
		if err != nil {
			return nil, stats, fmt.Errorf("line %d: %w", line, err)
		}
	}
}

// discardLine reads up to and including the next newline.
func discardLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// ReadFiles reads and concatenates the records of every file.
func ReadFiles(paths ...string) ([]Record, ReadStats, error) {
	var out []Record
	var stats ReadStats
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, stats, err
		}
		recs, s, err := Read(f)
		f.Close()
		if err != nil {
			return nil, stats, fmt.Errorf("%s: %w", p, err)
		}
		if s.Skipped > 0 {
			s.FirstSkippedFile = p
		}
		stats.add(s)
		out = append(out, recs...)
	}
	return out, stats, nil
}
