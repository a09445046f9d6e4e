package report

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kestrelops/tandem/exporter"
	"github.com/kestrelops/tandem/proxy/record"

	"github.com/kestrelops/tandem/cmd/internal/quantile"
)

// FromRecords compares A and B on per-request records. Quantiles are exact
// order statistics of the individual timings; A and B records of one
// mirrored request are joined by pair ID. The lines the reader skipped
// (read) are reported among the warnings.
func FromRecords(recs []record.Record, read record.ReadStats, o Options) (*Report, error) {
	if len(recs) == 0 {
		if read.Skipped > 0 {
			return nil, errors.New("no records; " + skippedLines(read))
		}
		return nil, errors.New("no records")
	}
	type pair struct{ a, b *record.Record }
	arms := map[string]*[2][]record.Record{}
	pairs := map[string]map[string]*pair{}
	var production map[string]float64
	estimated := 0
	// overloaded and mirrored count the production records that say so;
	// files older than Record.Mirror say neither and leave the share NaN.
	overloaded, mirrored := 0, 0
	ev := evidence{source: "records", skippedShare: math.NaN()}
	if read.Skipped > 0 {
		ev.warnings = append(ev.warnings, skippedLines(read))
	}
	ev.window = span(recs)
	for i := range recs {
		r := &recs[i]
		if r.TokensEstimated {
			estimated++
		}
		side := slices.Index(exporter.Arms, r.Config)
		if r.Config == exporter.ConfigProduction {
			if production == nil {
				production = map[string]float64{}
			}
			production[r.Class]++
			if reason, _ := r.SkipReason(); reason == exporter.SkipOverloaded {
				overloaded++
			} else if r.Mirror == record.MirrorMirrored {
				mirrored++
			}
			continue
		}
		if side < 0 {
			return nil, fmt.Errorf("record %d: unknown config %q", i+1, r.Config)
		}
		if arms[r.Class] == nil {
			arms[r.Class], pairs[r.Class] = &[2][]record.Record{}, map[string]*pair{}
		}
		arms[r.Class][side] = append(arms[r.Class][side], *r)
		if r.PairID == "" {
			continue
		}
		p := pairs[r.Class][r.PairID]
		if p == nil {
			p = &pair{}
			pairs[r.Class][r.PairID] = p
		}
		if side == 0 {
			p.a = r
		} else {
			p.b = r
		}
	}
	if len(arms) == 0 {
		return nil, errors.New("no records of A or B")
	}

	input := func(name string, arms [2][]record.Record, ps []*pair) classInput {
		in := classInput{name: name}
		w := span(append(slices.Clone(arms[0]), arms[1]...))
		in.seconds = w.End.Sub(w.Start).Seconds()
		id := func(p *pair) string {
			if p.a != nil {
				return p.a.PairID
			}
			return p.b.PairID
		}
		slices.SortFunc(ps, func(x, y *pair) int { return strings.Compare(id(x), id(y)) })
		var ids []string
		ttftPairs, speedPairs := &pairedSamples{}, &pairedSamples{}
		for i := range arms {
			in.arms[i] = recordArm(arms[i])
		}
		var diffs []float64
		for _, p := range ps {
			aOK := p.a != nil && p.a.Outcome == exporter.OutcomeCompleted
			bOK := p.b != nil && p.b.Outcome == exporter.OutcomeCompleted
			switch exporter.PairResult(aOK, bOK) {
			case exporter.PairBothCompleted:
				in.pairs.BothCompleted++
			case exporter.PairAFailed:
				in.pairs.AFailed++
			case exporter.PairBFailed:
				in.pairs.BFailed++
			default:
				in.pairs.BothFailed++
			}
			if !aOK || !bOK {
				continue
			}
			if p.a.OutputTokens != p.b.OutputTokens {
				in.pairs.TokenMismatches++
			}
			ids = append(ids, id(p))
			if sa, ok := p.a.Observation().OutputSpeed(); ok {
				if sb, ok := p.b.Observation().OutputSpeed(); ok {
					speedPairs.a, speedPairs.b = append(speedPairs.a, sa), append(speedPairs.b, sb)
				}
			}
			if p.a.FirstToken && p.b.FirstToken {
				ta, tb := p.a.Observation().TTFT.Seconds(), p.b.Observation().TTFT.Seconds()
				ttftPairs.a, ttftPairs.b = append(ttftPairs.a, ta), append(ttftPairs.b, tb)
				d := p.b.TTFTSeconds - p.a.TTFTSeconds
				diffs = append(diffs, d)
				if d < 0 {
					in.bFaster++
				}
			}
		}
		in.diffs = newSamples(diffs)
		ttftPairs.seed, speedPairs.seed = seedOf(ids), seedOf(ids)+1
		in.ttftPairs, in.speedPairs = ttftPairs, speedPairs
		k := KeepUp(append(slices.Clone(arms[0]), arms[1]...), o.RateTolerance)
		in.keepUp = &k
		return in
	}

	var all [2][]record.Record
	var allPairs []*pair
	spans := map[string]Window{}
	for _, class := range classOrder(slices.Collect(maps.Keys(arms))) {
		ps := slices.Collect(maps.Values(pairs[class]))
		ev.classes = append(ev.classes, input(class, *arms[class], ps))
		for i := range all {
			all[i] = append(all[i], arms[class][i]...)
		}
		allPairs = append(allPairs, ps...)
		spans[class] = span(append(slices.Clone(arms[class][0]), arms[class][1]...))
	}
	ev.mixed = input(MixedClass, all, allPairs)
	ev.production = production
	if overloaded+mirrored > 0 {
		ev.skippedShare = float64(overloaded) / float64(overloaded+mirrored)
	}
	ev.notMixedReplay = separateSpans(spans)
	if estimated > 0 {
		ev.warnings = append(ev.warnings, fmt.Sprintf("%d records counted output tokens from frames because the server sent no usage", estimated))
	}
	ev.definitions = []string{
		"TTFT: from tandem handing the request to the upstream to the first frame carrying output.",
		"Quantiles: nearest-rank order statistics of the individual timings; 95% intervals from order statistics (binomial), distribution-free.",
		"System output rate: output tokens of completed requests divided by the time from the arm's first request start to its last response end, per class and for the mix.",
		fmt.Sprintf("Kept up: judged on a steady-state window common to both arms, from the first request start plus a warm-up (the larger of the arms' p95 request durations) to the last request start, so that neither the ramp-up nor the drain of slower streams counts; each completed request's output tokens count as delivered evenly from its first to its last output frame. Steady-state rates within %[1]s of each other tie (both kept up: no capacity claim), and so do rates further apart when the lower one still matches, within %[1]s, the arrival side (output tokens of the requests started in the window over its length). Otherwise a rate lower beyond that means that arm fell behind (its backlog grew) when the difference also exceeds the edge noise, two standard deviations of what the requests straddling the window's edges make by chance (shot noise of the arrivals); otherwise, or when the window is shorter than %d warm-ups or holds fewer than %d completed requests per arm, the run is too short to judge.", percent(o.RateTolerance), minSteadyWarmUps, minSteadyRequests),
		"Per-request output speed: (output tokens - 1) / (last output frame - first output frame) of one request.",
		"B - A of TTFT p50, p95, p99 and of per-request speed p50: quantiles of the pairs both arms completed (joined by pair ID); 95% interval and ratio interval from a percentile bootstrap that resamples pairs (seeded from the pair IDs).",
		fmt.Sprintf("Verdicts of B against A: slower or faster (higher or lower for rates) when the 95%% interval of B - A leaves out zero; equivalent when the whole interval lies within the margin, ±%s of A's value; inconclusive when it holds zero and leaves the margin; insufficient_data below %d pairs; invalid when the arms did not do comparable work.", percent(o.Margin), o.MinPairs),
		"Smallest detectable change: the difference a run with this interval's width finds with 80% power, 1.43 times the interval's half-width; more pairs needed assume the interval narrows as 1/√pairs around the same estimate.",
		"Paired: B faster when its first token came first (Wilson 95% interval); median B - A with its sign-test interval.",
	}
	return build(ev, o), nil
}

// skippedLines says how many record lines the reader skipped, and where the
// first was.
func skippedLines(s record.ReadStats) string {
	where := fmt.Sprintf("line %d", s.FirstSkippedLine)
	if s.FirstSkippedFile != "" {
		where = fmt.Sprintf("%s:%d", s.FirstSkippedFile, s.FirstSkippedLine)
	}
	lines := "lines"
	if s.Skipped == 1 {
		lines = "line"
	}
	return fmt.Sprintf("%d corrupt or overlong record %s skipped (first at %s)", s.Skipped, lines, where)
}

func recordArm(recs []record.Record) armInput {
	s := quantile.SamplesOf(recs, record.Record.Observation)
	w := span(recs)
	return armInput{
		completed:    s.Completed,
		ttft:         samples(s.TTFT),
		itl:          samples(s.ITL),
		speed:        samples(s.Speed),
		outputTokens: float64(s.OutputTokens),
		seconds:      w.End.Sub(w.Start).Seconds(),
	}
}

// span is the time from the first request start to the last response end.
func span(recs []record.Record) Window {
	var w Window
	for i, r := range recs {
		if i == 0 || r.Start.Before(w.Start) {
			w.Start = r.Start
		}
		if i == 0 || r.End().After(w.End) {
			w.End = r.End()
		}
	}
	return w
}

// separateSpans names the classes whose traffic did not overlap in time:
// merging them is not a mixed replay.
func separateSpans(spans map[string]Window) []string {
	classes := classOrder(slices.Collect(maps.Keys(spans)))
	for i, c := range classes {
		for _, d := range classes[i+1:] {
			if !spans[c].End.After(spans[d].Start) || !spans[d].End.After(spans[c].Start) {
				var each []string
				for _, k := range classes {
					each = append(each, fmt.Sprintf("%s %s to %s", k, spans[k].Start.Format(time.RFC3339), spans[k].End.Format(time.RFC3339)))
				}
				return []string{"the classes ran in separate time spans (" + strings.Join(each, ", ") + "), so the merged traffic is not a mixed replay"}
			}
		}
	}
	return nil
}

// classOrder puts the built-in classes first, in their order, then the rest
// sorted.
func classOrder(classes []string) []string {
	slices.SortFunc(classes, func(a, b string) int {
		ia, ib := slices.Index(exporter.BuiltinClasses, a), slices.Index(exporter.BuiltinClasses, b)
		switch {
		case ia >= 0 && ib >= 0:
			return ia - ib
		case ia >= 0:
			return -1
		case ib >= 0:
			return 1
		}
		return strings.Compare(a, b)
	})
	return classes
}
