package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kestrelops/tandem/exporter"
)

// Writer appends records to a file from a background goroutine, so a slow or
// failing disk never holds up a request. When the file reaches MaxBytes it is
// renamed to path.1 (path.1 to path.2, and so on) and a new file is started;
// at most MaxFiles rotated files are kept.
//
// No record is ever glued to a partial line, whatever happens to the disk or
// the process:
//   - Records are batched as whole lines; each batch goes to the file in one
//     write, once a second and whenever it reaches 64 KiB.
//   - A write that fails part-way is cut back to its last whole line (or,
//     when the file cannot be truncated, the partial line is ended with a
//     newline, leaving one corrupt line) before anything else is written. The
//     batch's unwritten records are lost and counted; the next batch is tried
//     again, so recording resumes when space returns.
//   - A file that ends in a partial line when opened (the process before was
//     killed mid-write) gets a newline first: the partial line stays as one
//     corrupt line, which Read skips and counts, and is never glued to the
//     next record.
type Writer struct {
	path string
	opts WriterOptions
	open func(path string) (file, error)
	log  errorLog

	mu      sync.RWMutex // guards sending on queue against closing it
	closed  bool
	queue   chan Record
	done    chan struct{}
	dropped atomic.Uint64

	// Owned by run.
	f file // nil while the file cannot be opened
	// size is the file's length; whole is its length up to the end of its
	// last whole line, and dirty is set when the two differ.
	size, whole int64
	dirty       bool
	batch       []byte
	batched     int // records in batch
	closeErr    error
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// MaxBytes is the size at which the file is rotated.
	MaxBytes int64
	// MaxFiles is how many rotated files are kept besides the current one.
	MaxFiles int
	// Log receives write errors: the first at once, then at most one
	// summary a minute. Nil discards them.
	Log *slog.Logger
	// Counter counts write errors and lost records. Nil counts nothing.
	Counter Counter
}

// Counter counts what a Writer fails to write. *exporter.Metrics is one.
type Counter interface {
	// RecordWriteError counts one failed attempt to write, rotate or open
	// the file.
	RecordWriteError()
	// RecordsDropped counts n records lost, for reason
	// exporter.RecordDropQueueFull or exporter.RecordDropWriteError.
	RecordsDropped(reason string, n int)
}

type noCounter struct{}

func (noCounter) RecordWriteError()          {}
func (noCounter) RecordsDropped(string, int) {}

// file is what a Writer needs of an *os.File.
type file interface {
	io.Writer
	io.ReaderAt
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

func openFile(path string) (file, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

const (
	// writerQueue is how many records may wait for the disk before new
	// ones are dropped (and counted) rather than block a request.
	writerQueue = 8192
	// batchBytes is the batch size at which records are written before the
	// next tick.
	batchBytes = 64 * 1024
)

// NewWriter opens (appending to) path. Only a file that cannot be opened is
// an error; later failures are logged and counted, never returned.
func NewWriter(path string, o WriterOptions) (*Writer, error) {
	return newWriter(path, o, openFile)
}

func newWriter(path string, o WriterOptions, open func(string) (file, error)) (*Writer, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Counter == nil {
		o.Counter = noCounter{}
	}
	w := &Writer{path: path, opts: o, open: open, log: errorLog{log: o.Log.With("path", path)},
		queue: make(chan Record, writerQueue), done: make(chan struct{})}
	if err := w.reopen(); err != nil {
		return nil, err
	}
	if w.dirty {
		if err := w.mend(); err != nil {
			w.failed(err, 0)
		}
	}
	go w.run()
	return w, nil
}

// Write queues r. It never blocks: when the queue is full, or the Writer is
// closed, the record is dropped and counted.
func (w *Writer) Write(r Record) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.drop(exporter.RecordDropQueueFull, 1)
		return
	}
	select {
	case w.queue <- r:
	default:
		w.drop(exporter.RecordDropQueueFull, 1)
	}
}

// Dropped is the number of records lost, to a full queue or to write errors.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Close writes every queued record and closes the file. It returns an error
// when the last batch or closing the file failed; earlier failures have been
// logged and counted.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	return w.closeErr
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-w.queue:
			if !ok {
				w.closeErr = w.flush()
				if w.f != nil {
					if err := w.f.Close(); err != nil && w.closeErr == nil {
						w.closeErr = fmt.Errorf("record file: %w", err)
					}
				}
				w.log.close()
				return
			}
			w.add(r)
		case now := <-tick.C:
			w.flush()
			w.log.tick(now)
		}
	}
}

func (w *Writer) drop(reason string, n int) {
	if n > 0 {
		w.dropped.Add(uint64(n))
		w.opts.Counter.RecordsDropped(reason, n)
	}
}

// failed counts and logs a failed file operation that lost records.
func (w *Writer) failed(err error, records int) {
	w.opts.Counter.RecordWriteError()
	w.drop(exporter.RecordDropWriteError, records)
	w.log.failed(time.Now(), err, records)
}

func (w *Writer) add(r Record) {
	line, err := json.Marshal(r)
	if err != nil {
		w.failed(err, 1)
		return
	}
	line = append(line, '\n')
	if pending := w.size + int64(len(w.batch)); pending > 0 && pending+int64(len(line)) > w.opts.MaxBytes {
		w.flush()
		w.rotate()
	}
	w.batch = append(w.batch, line...)
	w.batched++
	if len(w.batch) >= batchBytes {
		w.flush()
	}
}

// flush writes the batch and empties it. A failure is counted and logged
// here; it is returned for Close.
func (w *Writer) flush() error {
	if w.batched == 0 {
		return nil
	}
	lost, err := w.writeBatch()
	if err != nil {
		w.failed(err, lost)
	} else {
		w.log.succeeded()
	}
	w.batch, w.batched = w.batch[:0], 0
	return err
}

// writeBatch writes the batch in one write and returns how many of its
// records did not reach the file whole.
func (w *Writer) writeBatch() (lost int, err error) {
	if w.f == nil {
		if err := w.reopen(); err != nil {
			return w.batched, err
		}
	}
	if w.dirty {
		if err := w.mend(); err != nil {
			return w.batched, err
		}
	}
	n, err := w.f.Write(w.batch)
	if err == nil && n < len(w.batch) {
		err = io.ErrShortWrite
	}
	if err != nil {
		written := w.batch[:n]
		w.whole = w.size + int64(bytes.LastIndexByte(written, '\n')+1)
		w.size += int64(n)
		w.dirty = w.size != w.whole
		return w.batched - bytes.Count(written, []byte{'\n'}), fmt.Errorf("record file: %w", err)
	}
	w.size += int64(n)
	w.whole = w.size
	return 0, nil
}

// mend ends the file on a whole line: it cuts off the partial line a failed
// write left or, when the file cannot be truncated (or the partial line was
// there when it was opened), ends that line with a newline.
func (w *Writer) mend() error {
	if w.whole < w.size && w.f.Truncate(w.whole) == nil {
		w.size, w.dirty = w.whole, false
		return nil
	}
	n, err := w.f.Write([]byte{'\n'})
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("record file: ending a partial line: %w", err)
	}
	w.whole, w.dirty = w.size, false
	return nil
}

// reopen opens the file and notes whether it ends in a partial line.
func (w *Writer) reopen() error {
	f, err := w.open(w.path)
	if err != nil {
		return fmt.Errorf("record file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("record file: %w", err)
	}
	size := st.Size()
	if size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			f.Close()
			return fmt.Errorf("record file: %w", err)
		}
		w.dirty = last[0] != '\n'
	} else {
		w.dirty = false
	}
	w.f, w.size, w.whole = f, size, size
	return nil
}

// rotate closes the file, shifts the rotated files by one and opens a new
// file. A failure is counted and logged: the writer then goes on with the
// old file, or with none until a later batch opens it.
func (w *Writer) rotate() {
	if w.f != nil {
		if w.dirty {
			w.mend()
		}
		w.f.Close()
		w.f = nil
	}
	w.size, w.whole, w.dirty = 0, 0, false
	if err := w.shift(); err != nil {
		w.failed(err, 0)
	}
	if err := w.reopen(); err != nil {
		w.failed(err, 0)
	}
}

func (w *Writer) shift() error {
	if w.opts.MaxFiles == 0 {
		if err := os.Remove(w.path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("record file: %w", err)
		}
		return nil
	}
	os.Remove(fmt.Sprintf("%s.%d", w.path, w.opts.MaxFiles))
	for i := w.opts.MaxFiles - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", w.path, i), fmt.Sprintf("%s.%d", w.path, i+1))
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return fmt.Errorf("record file: %w", err)
	}
	return nil
}

// errorLogInterval is the least time between two error lines.
const errorLogInterval = time.Minute

// errorLog logs write errors without flooding the log: the first at once,
// then at most one summary per errorLogInterval, and one line when writing
// works again.
type errorLog struct {
	log  *slog.Logger
	last time.Time // of the last error line
	// errors and lost count failures since the last line; err is the latest.
	errors, lost int
	err          error
	// failing is set by an error line and cleared by the line saying
	// writing works again.
	failing bool
}

func (l *errorLog) failed(now time.Time, err error, lost int) {
	l.errors++
	l.lost += lost
	l.err = err
	l.tick(now)
}

// tick logs the failures not logged yet, when errorLogInterval has passed.
func (l *errorLog) tick(now time.Time) {
	if l.errors == 0 || !l.last.IsZero() && now.Sub(l.last) < errorLogInterval {
		return
	}
	l.print()
	l.last = now
}

func (l *errorLog) print() {
	l.log.Error("writing records failed; recording goes on and retries", "err", l.err, "errors", l.errors, "records_lost", l.lost)
	l.errors, l.lost, l.failing = 0, 0, true
}

func (l *errorLog) succeeded() {
	if !l.failing {
		return
	}
	l.log.Info("writing records works again", "errors", l.errors, "records_lost", l.lost)
	l.errors, l.lost, l.failing = 0, 0, false
}

// close logs the failures not logged yet.
func (l *errorLog) close() {
	if l.errors > 0 {
		l.print()
	}
}
