package report

import (
	"fmt"
	"math"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// trace describes the mirrored traffic of one class: n requests arriving
// every gap from start, each sent to A and B at the same moment.
type trace struct {
	class  string
	start  time.Time
	n      int
	gap    time.Duration
	tokens int
	// p95 is the TTFT p95 of A and B; TTFTs step by 0.4 ms from rank to
	// rank, and pair i holds rank i on both arms.
	p95 [2]float64
	// span is each arm's time from first request start to last response
	// end, which fixes its system output rate.
	span [2]float64
	// firstDuration is the duration of each arm's first response; later
	// responses take longer step by step up to the last, whose duration
	// span fixes: an arm that fell behind the arrivals, whose backlog grew.
	// Zero means every response of the arm takes the same time: an arm
	// that kept up.
	firstDuration [2]float64
}

// records builds the A and B records of tr. edit, when not nil, may change
// pair i's records.
func (tr trace) records(edit func(i int, a, b *record.Record)) []record.Record {
	r95 := quantile.Rank(tr.n, 0.95)
	var out []record.Record
	for i := range tr.n {
		var pair [2]record.Record
		for side, config := range exporter.Arms {
			// whole nanoseconds, as tandem records them
			ttft := time.Duration(math.Round((tr.p95[side] + float64(i+1-r95)*0.0004) * 1e9)).Seconds()
			duration := tr.span[side] - (time.Duration(tr.n-1) * tr.gap).Seconds()
			if first := tr.firstDuration[side]; first > 0 {
				duration -= (duration - first) * float64(tr.n-1-i) / float64(tr.n-1)
			}
			pair[side] = record.Record{
				Start:            tr.start.Add(time.Duration(i) * tr.gap),
				Config:           config,
				Class:            tr.class,
				PairID:           fmt.Sprintf("%s-%d", tr.class, i),
				Outcome:          exporter.OutcomeCompleted,
				FirstToken:       true,
				TTFTSeconds:      ttft,
				LastTokenSeconds: duration - 0.5,
				DurationSeconds:  duration,
				OutputTokens:     tr.tokens,
				PromptTokens:     900,
				FinishReason:     "length",
			}
		}
		if edit != nil {
			edit(i, &pair[0], &pair[1])
		}
		out = append(out, pair[:]...)
	}
	return out
}

// The matched runs of the seed question: fresh prompts A 240 ms p95 and 800
// tokens/s, B 320 ms and 920; repeated prefixes A 190 ms and 880, B 170 ms
// and 1000. Each class ran on its own, one after the other.
//
// The story says B produced more tokens per second on the same trace, so
// A fell behind: B's responses take the same time all along (it kept up,
// delivering the arrivals' 960 and 1040 tokens/s in the steady state),
// while A's take longer step by step (12 s to 40.5 s, 11 s to 36.9 s) as its
// backlog grows, and it delivers about 900 and 980 tokens/s. Spans and
// token counts are chosen so that the system output rates over first start
// to last end are exactly the story's.
var (
	seedFresh = trace{
		class: exporter.ClassFresh, start: t0, n: 400, gap: 500 * time.Millisecond,
		tokens: 480, p95: [2]float64{0.240, 0.320}, span: [2]float64{400 * 480 / 800.0, 400 * 480 / 920.0},
		firstDuration: [2]float64{12, 0},
	}
	seedRepeated = trace{
		class: exporter.ClassRepeatedPrefix, start: t0.Add(1000 * time.Second), n: 400, gap: 500 * time.Millisecond,
		tokens: 520, p95: [2]float64{0.190, 0.170}, span: [2]float64{400 * 520 / 880.0, 400 * 520 / 1000.0},
		firstDuration: [2]float64{11, 0},
	}
)

func seedRecords() []record.Record {
	return append(seedFresh.records(nil), seedRepeated.records(nil)...)
}
