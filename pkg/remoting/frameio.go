package remoting

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// FrameReader reads frames from a stream through one reusable buffer: a frame that fits the
// buffer is decoded in place, so reading costs only what the decoded Command keeps.
type FrameReader struct {
	br  *bufio.Reader
	max int
}

// NewFrameReader reads from r with a buffer of bufSize bytes (32 KiB if <= 0) and refuses
// frames larger than maxFrameSize bytes including the length field (DefaultMaxFrameSize if <= 0).
func NewFrameReader(r io.Reader, bufSize, maxFrameSize int) *FrameReader {
	if bufSize <= 0 {
		bufSize = 32 << 10
	}
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	return &FrameReader{br: bufio.NewReaderSize(r, bufSize), max: maxFrameSize}
}

// ReadCommand reads and decodes the next frame. Errors from the stream are returned as they
// are (io.EOF at a frame boundary, io.ErrUnexpectedEOF inside a frame); a frame that is
// oversized (a *LimitError), too short or undecodable gives an error wrapping ErrFrame, after
// which the stream is out of step and must be closed. The exception is a *FieldRangeError: that
// frame was read whole and the next one can be read.
func (fr *FrameReader) ReadCommand() (*Command, error) {
	head, err := fr.br.Peek(4)
	if err != nil {
		if err == io.EOF && len(head) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	length := int64(int32(binary.BigEndian.Uint32(head)))
	if length < 4 {
		return nil, frameError("frame length %d is smaller than the header length word", length)
	}
	if length+4 > int64(fr.max) {
		// Refused on its length word alone, before a byte of it is buffered.
		return nil, overLimit(ErrFrame, "%v: frame of %d bytes exceeds the limit of %d bytes", ErrFrame, length+4, fr.max)
	}
	n := int(length) + 4
	if n <= fr.br.Size() {
		frame, err := fr.br.Peek(n)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		cmd, err := Decode(frame[4:])
		_, _ = fr.br.Discard(n)
		return cmd, err
	}
	_, _ = fr.br.Discard(4)
	frame := make([]byte, length)
	if _, err := io.ReadFull(fr.br, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return Decode(frame)
}

// Buffered returns how many bytes have been read from the stream but not yet consumed; a
// server that answers inline can flush its responses once this drops to zero.
func (fr *FrameReader) Buffered() int { return fr.br.Buffered() }

// Complete reports whether a whole frame is already buffered, so the next ReadCommand will not
// wait for the network. A server answering inline flushes its queued responses when it is false.
func (fr *FrameReader) Complete() bool {
	n := fr.br.Buffered()
	if n < 4 {
		return false
	}
	head, _ := fr.br.Peek(4)
	length := int64(int32(binary.BigEndian.Uint32(head)))
	// A frame the reader will refuse counts as complete: reading it fails without waiting.
	return length < 4 || length+4 > int64(fr.max) || int64(n) >= length+4
}

// FrameWriter batches frames written concurrently onto one stream, so under load many frames go
// out in one system call. Writers append their frame to a shared buffer. In the direct mode
// (NewFrameWriter) whoever finds no write in progress becomes the flusher and writes everything
// queued, looping until the buffer is empty, while the others return at once. In the queued mode
// (NewQueuedFrameWriter) writers never touch the socket: one goroutine running Run does all the
// writing.
//
// A write error is sticky: every later call returns it.
type FrameWriter struct {
	w       io.Writer
	conn    net.Conn // for write deadlines; nil if w is not a net.Conn
	timeout time.Duration

	mu       sync.Mutex
	buf      []byte
	spare    []byte
	flushing bool
	err      error

	queued bool          // Write only queues; Run writes
	wake   chan struct{} // capacity 1: "there may be something to write"

	writes atomic.Int64 // system writes made, to see how well frames batch
}

// MaxQueuedBytes bounds what a FrameWriter holds for a peer that does not read: beyond it the
// writer fails with ErrQueueFull and closes the connection, so a peer that never reads costs
// the process its connection, not its memory.
const MaxQueuedBytes = 64 << 20

// ErrQueueFull is the sticky error of a FrameWriter whose peer stopped reading.
var ErrQueueFull = fmt.Errorf("%w: the peer does not read; more than %d bytes queued", ErrClosed, MaxQueuedBytes)

// maxRetainedBuffer bounds the write buffer kept between flushes, so one large frame does not
// pin its memory for the life of the connection.
const maxRetainedBuffer = 256 << 10

// NewFrameWriter writes to w. If w is a net.Conn and writeTimeout > 0, every system write gets
// that deadline, so a peer that stops reading cannot block writers forever.
func NewFrameWriter(w io.Writer, writeTimeout time.Duration) *FrameWriter {
	fw := &FrameWriter{w: w, timeout: writeTimeout, buf: make([]byte, 0, 4096)}
	if c, ok := w.(net.Conn); ok && writeTimeout > 0 {
		fw.conn = c
	}
	return fw
}

// NewQueuedFrameWriter returns a FrameWriter whose Write and WriteCommand only queue: the
// goroutine running Run does all the writing. Callers then never block on the socket, however
// slowly the peer reads, so their own deadlines hold; frames queued while a write is in progress
// go out together in the next one.
func NewQueuedFrameWriter(w io.Writer, writeTimeout time.Duration) *FrameWriter {
	fw := NewFrameWriter(w, writeTimeout)
	fw.queued = true
	fw.wake = make(chan struct{}, 1)
	return fw
}

// Run writes what a queued FrameWriter queues until stop closes (it returns nil) or a write
// fails (it returns the error, which is also sticky). Call it from exactly one goroutine.
func (fw *FrameWriter) Run(stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		case <-fw.wake:
		}
		// Let the goroutines that are ready to run queue their frames first: the caller that
		// woke us made us its successor, so without yielding each write would carry one frame.
		runtime.Gosched()
		fw.mu.Lock()
		if err := fw.flushLocked(); err != nil {
			return err
		}
	}
}

// Write queues one complete frame and flushes. It returns nil once the frame is queued behind
// an active flusher (or for a queued writer, once it is queued), or after this call has written
// it; the frame is copied, so the caller may reuse it on return.
func (fw *FrameWriter) Write(frame []byte) error {
	fw.mu.Lock()
	if fw.err != nil {
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	if err := fw.overflowLocked(len(frame)); err != nil {
		fw.mu.Unlock()
		return err
	}
	fw.buf = append(fw.buf, frame...)
	if fw.queued {
		fw.mu.Unlock()
		fw.signal()
		return nil
	}
	return fw.flushLocked()
}

// overflowLocked fails the writer (sticky, connection closed) when n more bytes would queue more
// than MaxQueuedBytes. fw.mu must be held.
func (fw *FrameWriter) overflowLocked(n int) error {
	if len(fw.buf)+n <= MaxQueuedBytes {
		return nil
	}
	fw.err = ErrQueueFull
	fw.buf = nil
	if fw.conn != nil {
		_ = fw.conn.Close()
	} else if c, ok := fw.w.(io.Closer); ok {
		_ = c.Close()
	}
	return fw.err
}

// signal wakes Run without blocking; one pending wake-up covers any number of frames.
func (fw *FrameWriter) signal() {
	select {
	case fw.wake <- struct{}{}:
	default:
	}
}

// WriteCommand encodes c into the queue and flushes when flush is true; with flush false the
// frame waits for the next Flush or Write, which lets a server batch the answers to everything
// it has read. A queued writer always hands the frame to Run.
func (fw *FrameWriter) WriteCommand(c *Command, flush bool) error {
	fw.mu.Lock()
	if fw.err != nil {
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	if err := fw.overflowLocked(0); err != nil {
		fw.mu.Unlock()
		return err
	}
	var err error
	fw.buf, err = AppendFrame(fw.buf, c)
	if err != nil {
		fw.mu.Unlock()
		return err
	}
	if fw.queued {
		fw.mu.Unlock()
		fw.signal()
		return nil
	}
	if !flush {
		fw.mu.Unlock()
		return nil
	}
	return fw.flushLocked()
}

// WriteRaw queues arbitrary bytes (used to simulate broken peers) and flushes.
func (fw *FrameWriter) WriteRaw(b []byte) error { return fw.Write(b) }

// Flush writes everything queued (for a queued writer: wakes Run to do it).
func (fw *FrameWriter) Flush() error {
	if fw.queued {
		fw.signal()
		return fw.Err()
	}
	fw.mu.Lock()
	return fw.flushLocked()
}

// Writes returns how many writes to the underlying stream have been made; frames written
// divided by Writes is how well concurrent writers were batched.
func (fw *FrameWriter) Writes() int64 { return fw.writes.Load() }

// Err returns the sticky write error, if any.
func (fw *FrameWriter) Err() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
}

// flushLocked is called with mu held and releases it.
func (fw *FrameWriter) flushLocked() error {
	if fw.flushing || len(fw.buf) == 0 {
		err := fw.err
		fw.mu.Unlock()
		return err
	}
	fw.flushing = true
	for len(fw.buf) > 0 && fw.err == nil {
		out := fw.buf
		fw.buf = fw.spare[:0]
		fw.spare = nil
		fw.mu.Unlock()

		var err error
		if fw.conn != nil {
			err = fw.conn.SetWriteDeadline(time.Now().Add(fw.timeout))
		}
		if err == nil {
			_, err = fw.w.Write(out)
			fw.writes.Add(1)
		}

		fw.mu.Lock()
		if err != nil {
			fw.err = err
		}
		if cap(out) <= maxRetainedBuffer {
			fw.spare = out[:0]
		}
	}
	fw.flushing = false
	err := fw.err
	if err != nil {
		fw.buf = nil
	}
	fw.mu.Unlock()
	return err
}
