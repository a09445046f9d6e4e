package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// counts is a Counter for tests.
type counts struct {
	mu          sync.Mutex
	writeErrors int
	lost        map[string]int
}

func (c *counts) RecordWriteError() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeErrors++
}

func (c *counts) RecordsDropped(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost == nil {
		c.lost = map[string]int{}
	}
	c.lost[reason] += n
}

func (c *counts) errors() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeErrors
}

func (c *counts) dropped(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost[reason]
}

func (c *counts) snapshot() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d write errors, lost %v", c.writeErrors, c.lost)
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines is the file of records 0..n-1.
func lines(t *testing.T, n int) []byte {
	t.Helper()
	var b []byte
	for i := range n {
		line, err := json.Marshal(sample(i))
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	return b
}

// writeAndRead opens a Writer on path, writes records from..to-1, closes it
// and reads path back.
func writeAndRead(t *testing.T, path string, from, to int) ([]Record, ReadStats) {
	t.Helper()
	w, err := NewWriter(path, WriterOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		w.Write(sample(i))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, stats, err := ReadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs, stats
}

// A kill -9 mid-write leaves a partial last line; the next Writer sets it
// aside as a line of its own, and the reader skips it.
func TestWriterSetsAsidePartialLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	whole := lines(t, 3)
	partial := []byte(`{"time":"2023-11-14T22:13:20Z","config":"A","cla`)
	if err := os.WriteFile(path, append(bytes.Clone(whole), partial...), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, stats := writeAndRead(t, path, 3, 8)
	if len(recs) != 8 || recs[7] != sample(7) {
		t.Fatalf("read %d records, want the 3 before the crash and the 5 after", len(recs))
	}
	if stats.Skipped != 1 || stats.FirstSkippedLine != 4 {
		t.Fatalf("stats = %+v, want the partial line 4 skipped", stats)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, append(append(whole, partial...), '\n')) {
		t.Fatalf("the partial line was not kept whole on a line of its own:\n%s", b)
	}
}

// A crash between a record and its newline leaves a whole record: it is
// kept.
func TestWriterEndsAWholeLastRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	b := lines(t, 2)
	if err := os.WriteFile(path, b[:len(b)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	recs, stats := writeAndRead(t, path, 2, 4)
	if len(recs) != 4 || stats.Skipped != 0 {
		t.Fatalf("read %d records, %+v; want 4 and none skipped", len(recs), stats)
	}
}

const killChildEnv = "TANDEM_RECORD_KILL_CHILD"

// TestWriterSurvivesKill kills a process writing records with SIGKILL, then
// appends to its file: nothing is lost but what was in flight, and at most
// the line being written is skipped.
func TestWriterSurvivesKill(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		w, err := NewWriter(path, WriterOptions{MaxBytes: 1 << 30})
		if err != nil {
			os.Exit(2)
		}
		for i := 0; ; i++ {
			w.Write(sample(i))
			if i%64 == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := filepath.Join(t.TempDir(), "records.jsonl")
	var before int
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterSurvivesKill$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if st, err := os.Stat(path); err == nil && st.Size() > int64(round+1)*256<<10 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the child wrote too little")
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("child: %v, want killed", err)
		}
		recs, stats := writeAndRead(t, path, 1000000, 1000010)
		if stats.Skipped > round+1 {
			t.Fatalf("round %d: %d lines skipped, want at most one per kill", round, stats.Skipped)
		}
		if len(recs) < before+10 || recs[len(recs)-1] != sample(1000009) {
			t.Fatalf("round %d: read %d records after %d, want the child's and 10 more at the end", round, len(recs), before)
		}
		before = len(recs)
	}
}

// smallDisk holds files of at most capacity bytes: a write beyond it writes
// what fits and fails with ENOSPC, as on a full file system.
type smallDisk struct {
	mu       sync.Mutex
	capacity int64
	// noTruncate makes Truncate fail, as on files that cannot be truncated.
	noTruncate bool
}

func (d *smallDisk) setCapacity(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capacity = n
}

func (d *smallDisk) open(path string) (file, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &diskFile{File: f, disk: d}, nil
}

type diskFile struct {
	*os.File
	disk *smallDisk
}

func (f *diskFile) Write(p []byte) (int, error) {
	f.disk.mu.Lock()
	defer f.disk.mu.Unlock()
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	if free := f.disk.capacity - st.Size(); free < int64(len(p)) {
		n, _ := f.File.Write(p[:max(free, 0)])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f *diskFile) Truncate(size int64) error {
	if f.disk.noTruncate {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: syscall.EINVAL}
	}
	return f.File.Truncate(size)
}

// TestWriterRecoversFromFullDisk fills the disk for three minutes: every
// batch fails part-way, errors are counted and logged about once a minute,
// and when space returns recording goes on in a file of whole lines.
func TestWriterRecoversFromFullDisk(t *testing.T) {
	for _, truncate := range []bool{true, false} {
		t.Run(fmt.Sprintf("truncate=%v", truncate), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "records.jsonl")
				disk := &smallDisk{capacity: 1 << 30, noTruncate: !truncate}
				var c counts
				var logs syncBuffer
				w, err := newWriter(path, WriterOptions{MaxBytes: 1 << 30, Counter: &c,
					Log: slog.New(slog.NewTextHandler(&logs, nil))}, disk.open)
				if err != nil {
					t.Fatal(err)
				}
				i := 0
				writeEachSecond := func(seconds int) {
					for range seconds {
						w.Write(sample(i))
						i++
						time.Sleep(time.Second)
						synctest.Wait()
					}
				}
				writeEachSecond(10)
				st, _ := os.Stat(path)
				disk.setCapacity(st.Size() + 100) // less than a record
				const full = 180
				writeEachSecond(full)
				if n := c.errors(); n != full {
					t.Errorf("%d write errors counted, want %d", n, full)
				}
				if n := c.dropped(exporter.RecordDropWriteError); n != full || w.Dropped() != full {
					t.Errorf("%d records counted lost (Dropped %d), want %d", n, w.Dropped(), full)
				}
				disk.setCapacity(1 << 30)
				writeEachSecond(10)
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}

				log := logs.String()
				errorLines := regexp.MustCompile(`(?m)^.*level=ERROR.*$`).FindAllString(log, -1)
				if len(errorLines) < 3 || len(errorLines) > 4 {
					t.Errorf("%d error lines for %d errors over 3 minutes, want the first and about one a minute:\n%s", len(errorLines), full, log)
				}
				logged := 0
				for _, m := range regexp.MustCompile(` errors=(\d+)`).FindAllStringSubmatch(log, -1) {
					n, _ := strconv.Atoi(m[1])
					logged += n
				}
				if logged != full || !regexp.MustCompile(`level=INFO msg="writing records works again"`).MatchString(log) {
					t.Errorf("the log accounts for %d errors, want %d, and says when writing works again:\n%s", logged, full, log)
				}

				recs, stats, err := ReadFiles(path)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != 20 || recs[19] != sample(full+19) {
					t.Errorf("read %d records, want the 10 before the disk filled and the 10 after", len(recs))
				}
				wantSkipped := 0
				if !truncate {
					wantSkipped = 1 // the partial line of the first failure, ended with a newline
				}
				if stats.Skipped != wantSkipped {
					t.Errorf("%d lines skipped, want %d", stats.Skipped, wantSkipped)
				}
			})
		})
	}
}

// A failed write keeps the whole lines it wrote and cuts off only the
// partial one.
func TestWriterKeepsWholeLinesOfAFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "records.jsonl")
		disk := &smallDisk{capacity: int64(len(lines(t, 3))) + 10}
		var c counts
		w, err := newWriter(path, WriterOptions{MaxBytes: 1 << 30, Counter: &c}, disk.open)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			w.Write(sample(i))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		disk.setCapacity(1 << 30)
		w.Write(sample(5))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		recs, stats, err := ReadFiles(path)
		if err != nil || stats.Skipped != 0 {
			t.Fatal(err, stats)
		}
		if len(recs) != 4 || recs[2] != sample(2) || recs[3] != sample(5) {
			t.Fatalf("read %d records, want records 0 to 2 and 5", len(recs))
		}
		if n := c.dropped(exporter.RecordDropWriteError); n != 2 {
			t.Fatalf("%d records counted lost, want 2", n)
		}
	})
}

// /dev/full fails every write with ENOSPC: records are counted lost, and
// Close reports the last failure.
func TestWriterOnDevFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("this test needs Linux's /dev/full: %v", err)
	}
	var c counts
	w, err := NewWriter("/dev/full", WriterOptions{MaxBytes: 1 << 20, Counter: &c})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		w.Write(sample(i))
	}
	err = w.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close() = %v, want ENOSPC", err)
	}
	if c.errors() == 0 || c.dropped(exporter.RecordDropWriteError) != 10 || w.Dropped() != 10 {
		t.Errorf("counted %s, Dropped %d; want write errors and 10 records lost", c.snapshot(), w.Dropped())
	}
}
