package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Writer appends records to a file from a background goroutine, so a slow
// disk never holds up a request. When the file reaches maxBytes it is renamed
// to path.1 (path.1 to path.2, and so on) and a new file is started; at most
// maxFiles rotated files are kept.
type Writer struct {
	path     string
	maxBytes int64
	maxFiles int

	mu      sync.RWMutex // guards sending on queue against closing it
	closed  bool
	queue   chan Record
	done    chan struct{}
	dropped atomic.Uint64

	f    *os.File
	buf  *bufio.Writer
	size int64
	err  error
}

// writerQueue is how many records may wait for the disk before new ones are
// dropped (and counted) rather than block a request.
const writerQueue = 8192

// NewWriter opens (appending to) path.
func NewWriter(path string, maxBytes int64, maxFiles int) (*Writer, error) {
	w := &Writer{path: path, maxBytes: maxBytes, maxFiles: maxFiles,
		queue: make(chan Record, writerQueue), done: make(chan struct{})}
	if err := w.open(); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// Write queues r. It never blocks: when the queue is full, or the Writer is
// closed, the record is dropped and counted in Dropped.
func (w *Writer) Write(r Record) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	select {
	case w.queue <- r:
	default:
		w.dropped.Add(1)
	}
}

// Dropped is the number of records lost to a full queue.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Close writes every queued record and closes the file. It returns the first
// write error met, if any.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	return w.err
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-w.queue:
			if !ok {
				w.keep(w.buf.Flush())
				w.keep(w.f.Close())
				return
			}
			w.keep(w.write(r))
		case <-tick.C:
			w.keep(w.buf.Flush())
		}
	}
}

func (w *Writer) keep(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

func (w *Writer) write(r Record) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	if w.size > 0 && w.size+int64(len(line)) > w.maxBytes {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.buf.Write(line)
	w.size += int64(n)
	return err
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("record file: %w", err)
	}
	w.f, w.buf, w.size = f, bufio.NewWriterSize(f, 64*1024), st.Size()
	return nil
}

func (w *Writer) rotate() error {
	if err := w.buf.Flush(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	if w.maxFiles == 0 {
		if err := os.Remove(w.path); err != nil {
			return err
		}
		return w.open()
	}
	os.Remove(fmt.Sprintf("%s.%d", w.path, w.maxFiles))
	for i := w.maxFiles - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", w.path, i), fmt.Sprintf("%s.%d", w.path, i+1))
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return err
	}
	return w.open()
}
