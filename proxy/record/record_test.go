package record

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

func sample(i int) Record {
	return New(time.Unix(1700000000, int64(i)), exporter.ConfigA, exporter.ClassFresh, fmt.Sprintf("%016x", i), exporter.Observation{
		Outcome: exporter.OutcomeCompleted, FirstToken: true,
		TTFT: 120 * time.Millisecond, LastToken: 1120 * time.Millisecond, Duration: 1200 * time.Millisecond,
		OutputTokens: 51, PromptTokens: 400, CachedPromptTokens: 256, FinishReason: "stop",
	})
}

func TestWriterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	w, err := NewWriter(path, WriterOptions{MaxBytes: 1 << 20, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		w.Write(sample(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, stats, err := ReadFiles(path)
	if err != nil || stats.Skipped != 0 {
		t.Fatal(err, stats)
	}
	if len(got) != 100 {
		t.Fatalf("read %d records, want 100", len(got))
	}
	if got[7] != sample(7) {
		t.Fatalf("record 7 = %+v, want %+v", got[7], sample(7))
	}
	speed, ok := got[0].Observation().OutputSpeed()
	if !ok || speed != 50 {
		t.Fatalf("output speed = %v, %v; want 50 tokens/s (50 tokens after the first in 1s)", speed, ok)
	}
	if end := got[0].End(); !end.Equal(got[0].Start.Add(1200 * time.Millisecond)) {
		t.Fatalf("End() = %v", end)
	}
}

func TestWriterRotatesAndKeepsMaxFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	w, err := NewWriter(path, WriterOptions{MaxBytes: 2048, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		w.Write(sample(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("a third rotated file exists (err %v); at most 2 are kept", err)
	}
	var total int
	for _, p := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > 2048 {
			t.Errorf("%s is %d bytes, over the 2048 limit", p, st.Size())
		}
		recs, stats, err := ReadFiles(p)
		if err != nil || stats.Skipped != 0 {
			t.Fatal(err, stats)
		}
		total += len(recs)
	}
	if total == 0 || total >= n {
		t.Fatalf("kept %d records of %d: rotation should have dropped the oldest files", total, n)
	}
	// The newest record is in the current file.
	recs, _, _ := ReadFiles(path)
	if last := recs[len(recs)-1]; last != sample(n-1) {
		t.Fatalf("last record in the current file = %+v", last)
	}
}

func TestWriterNeverBlocks(t *testing.T) {
	var c counts
	w := &Writer{queue: make(chan Record, 1), opts: WriterOptions{Counter: &c}}
	w.Write(sample(1))
	w.Write(sample(2)) // queue full, nobody draining: dropped, not blocked
	if w.Dropped() != 1 || c.dropped(exporter.RecordDropQueueFull) != 1 {
		t.Fatalf("Dropped() = %d, counted %v; want 1 queue_full", w.Dropped(), c.snapshot())
	}
}

func TestRecordsHoldNoPromptText(t *testing.T) {
	b := fmt.Sprintf("%+v", sample(1))
	for _, field := range []string{"prompt:", "content", "messages"} {
		if strings.Contains(strings.ToLower(b), field) {
			t.Errorf("record has a %q field: %s", field, b)
		}
	}
}

// A request cut at the end of the shutdown grace period may finish after the
// file is closed; its record is dropped, not a panic.
func TestWriteAfterCloseIsDropped(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "records.jsonl"), WriterOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Write(sample(1))
	if n := w.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}
}

func TestReadSkipsCorruptAndOverlongLines(t *testing.T) {
	whole := func(i int) string {
		b, err := json.Marshal(sample(i))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	input := strings.Join([]string{
		whole(1),
		"",
		`{"time":"2026-11-02T09:00:00Z","config":"A","cl`, // partial line a crash left
		whole(2),
		"   ",
		strings.Repeat("x", 2<<20), // overlong
		whole(3) + whole(4),        // two records glued together
		"not json",
		whole(5), // no trailing newline
	}, "\n")
	got, stats, err := Read(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{sample(1), sample(2), sample(5)}
	if !slices.Equal(got, want) {
		t.Errorf("read %d records %+v, want records 1, 2 and 5", len(got), got)
	}
	if stats != (ReadStats{Skipped: 4, FirstSkippedLine: 3}) {
		t.Errorf("stats = %+v, want 4 skipped, the first on line 3", stats)
	}
}

func TestReadOverlongLastLine(t *testing.T) {
	got, stats, err := Read(strings.NewReader(`{"config":"A"}` + "\n" + strings.Repeat("x", 2<<20)))
	if err != nil || len(got) != 1 || stats.Skipped != 1 || stats.FirstSkippedLine != 2 {
		t.Fatalf("read %d records, %+v, %v; want 1 record and line 2 skipped", len(got), stats, err)
	}
}

func TestReadFilesNamesFirstSkippedFile(t *testing.T) {
	dir := t.TempDir()
	clean, torn := filepath.Join(dir, "records.jsonl.1"), filepath.Join(dir, "records.jsonl")
	os.WriteFile(clean, []byte(`{"config":"A"}`+"\n"), 0o600)
	os.WriteFile(torn, []byte(`{"config":"B"}`+"\n"+`{"config":`+"\n"+`{"con`), 0o600)
	got, stats, err := ReadFiles(clean, torn)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d records, %v; want 2", len(got), err)
	}
	if stats != (ReadStats{Skipped: 2, FirstSkippedFile: torn, FirstSkippedLine: 2}) {
		t.Errorf("stats = %+v, want 2 skipped, the first at %s:2", stats, torn)
	}
}

func FuzzRead(f *testing.F) {
	line, _ := json.Marshal(sample(1))
	f.Add(string(line) + "\n" + string(line))
	f.Add("{\"config\":\n\n\r\n{}")
	f.Fuzz(func(t *testing.T, input string) {
		if len(input) > 1<<16 {
			return
		}
		got, stats, err := Read(strings.NewReader(input))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(input, "\n") + 1
		if len(got)+stats.Skipped > lines || (stats.Skipped > 0) != (stats.FirstSkippedLine > 0) || stats.FirstSkippedLine > lines {
			t.Fatalf("%d records and %+v from %d lines", len(got), stats, lines)
		}
	})
}

func TestFinishReasonIsBounded(t *testing.T) {
	for reason, want := range map[string]string{
		"stop": "stop", "tool_calls": "tool_calls", "max_output_tokens": "max_output_tokens", "": "",
		"end_turn": "end_turn", "model:eos-1.2": "model:eos-1.2",
		strings.Repeat("a", 64): strings.Repeat("a", 64),
		strings.Repeat("a", 65): FinishReasonOther,
		"stop because":          FinishReasonOther,
		"stop\n":                FinishReasonOther,
		"arrêt":                 FinishReasonOther,
	} {
		if got := New(time.Time{}, exporter.ConfigA, exporter.ClassFresh, "", exporter.Observation{FinishReason: reason}).FinishReason; got != want {
			t.Errorf("finish reason %q recorded as %q, want %q", reason, got, want)
		}
	}
}

// A hostile upstream's 900 KB finish reason made a 5 MB record line.
func TestHugeFinishReasonKeepsTheLineSmall(t *testing.T) {
	o := exporter.Observation{Outcome: exporter.OutcomeCompleted, FinishReason: strings.Repeat(`"\u2028<`, 900_000/8)}
	line, err := json.Marshal(New(time.Now(), exporter.ConfigA, exporter.ClassFresh, "0123456789abcdef", o))
	if err != nil {
		t.Fatal(err)
	}
	if len(line) >= 1024 {
		t.Fatalf("record line is %d bytes, want under 1 KB", len(line))
	}
}

func TestObservationIsWhatNewRecorded(t *testing.T) {
	o := exporter.Observation{
		Outcome: exporter.OutcomeCompleted, FirstToken: true,
		TTFT: 123456789 * time.Nanosecond, LastToken: 2345678901 * time.Nanosecond, Duration: 3456789012 * time.Nanosecond,
		OutputTokens: 51, TokensEstimated: true, PromptTokens: 400, CachedPromptTokens: 256, FinishReason: "stop",
	}
	b, err := json.Marshal(New(time.Unix(1700000000, 0), exporter.ConfigA, exporter.ClassFresh, "p", o))
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if got := r.Observation(); got != o {
		t.Errorf("Observation() = %+v, want %+v", got, o)
	}
}

func TestMirrorFieldIsOptional(t *testing.T) {
	old := `{"time":"2026-01-01T00:00:00Z","config":"production","class":"fresh","outcome":"completed","first_token":true,"ttft_seconds":0.1,"last_token_seconds":0.2,"duration_seconds":0.2,"output_tokens":3,"prompt_tokens":5,"cached_prompt_tokens":0}
{"time":"2026-01-01T00:00:01Z","config":"production","class":"fresh","outcome":"completed","first_token":true,"ttft_seconds":0.1,"last_token_seconds":0.2,"duration_seconds":0.2,"output_tokens":3,"prompt_tokens":5,"cached_prompt_tokens":0,"mirror":"skipped:overloaded"}
`
	recs, stats, err := Read(strings.NewReader(old))
	if err != nil || stats.Skipped != 0 || len(recs) != 2 {
		t.Fatalf("read %d records, %+v, %v", len(recs), stats, err)
	}
	if recs[0].Mirror != "" {
		t.Errorf("a record without the field has mirror %q", recs[0].Mirror)
	}
	if _, ok := recs[0].SkipReason(); ok {
		t.Error("a record without the field has a skip reason")
	}
	if reason, ok := recs[1].SkipReason(); !ok || reason != exporter.SkipOverloaded || recs[1].Mirror != Skipped(exporter.SkipOverloaded) {
		t.Errorf("skip reason %q, %v from %q", reason, ok, recs[1].Mirror)
	}
	if _, ok := (Record{Mirror: MirrorMirrored}).SkipReason(); ok {
		t.Error("a mirrored record has a skip reason")
	}
}
