package record

import (
	"fmt"
	"os"
	"path/filepath"
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
	w, err := NewWriter(path, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		w.Write(sample(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("read %d records, want 100", len(got))
	}
	if got[7] != sample(7) {
		t.Fatalf("record 7 = %+v, want %+v", got[7], sample(7))
	}
	speed, ok := got[0].OutputSpeed()
	if !ok || speed != 50 {
		t.Fatalf("output speed = %v, %v; want 50 tokens/s (50 tokens after the first in 1s)", speed, ok)
	}
	if end := got[0].End(); !end.Equal(got[0].Start.Add(1200 * time.Millisecond)) {
		t.Fatalf("End() = %v", end)
	}
}

func TestWriterRotatesAndKeepsMaxFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	w, err := NewWriter(path, 2048, 2)
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
		recs, err := ReadFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		total += len(recs)
	}
	if total == 0 || total >= n {
		t.Fatalf("kept %d records of %d: rotation should have dropped the oldest files", total, n)
	}
	// The newest record is in the current file.
	recs, _ := ReadFiles(path)
	if last := recs[len(recs)-1]; last != sample(n-1) {
		t.Fatalf("last record in the current file = %+v", last)
	}
}

func TestWriterNeverBlocks(t *testing.T) {
	w := &Writer{queue: make(chan Record, 1)}
	w.Write(sample(1))
	w.Write(sample(2)) // queue full, nobody draining: dropped, not blocked
	if w.Dropped() != 1 {
		t.Fatalf("Dropped() = %d, want 1", w.Dropped())
	}
}

func TestReadNamesMalformedLine(t *testing.T) {
	_, err := Read(strings.NewReader(`{"config":"A"}` + "\n\n" + `{"config":` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("error %v does not name line 3", err)
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
	w, err := NewWriter(filepath.Join(t.TempDir(), "records.jsonl"), 1<<20, 0)
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

func TestReadNamesOverlongLine(t *testing.T) {
	_, err := Read(strings.NewReader(`{"config":"A"}` + "\n" + strings.Repeat("x", 2<<20) + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v does not name line 2", err)
	}
}
