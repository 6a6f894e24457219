package producer

import (
	"bytes"
	"compress/zlib"
	"context"
	"sync"
)

// DefaultCompressThreshold is the body size from which the runtime compresses, RocketMQ's
// DefaultMQProducer.compressMsgBodyOverHowmuch (4 KiB).
const DefaultCompressThreshold = 4 << 10

// Bits of a message's sysFlag (RocketMQ's MessageSysFlag) that the runtime sets and reads.
const (
	// SysFlagCompressed marks a body as compressed; every RocketMQ consumer inflates such a body
	// before handing the message out.
	SysFlagCompressed int32 = 0x1
	// SysFlagZlib names the compression type zlib (5.x and 4.9.4+ producers set it beside
	// SysFlagCompressed). Consumers from before compression types read no type bits and inflate
	// with zlib, so the pair reads the same everywhere.
	SysFlagZlib int32 = 0x3 << 8
	// SysFlagCompressionType selects the compression type bits, of which SysFlagZlib is one value.
	SysFlagCompressionType int32 = 0x7 << 8
)

// compressLevel is the zlib level RocketMQ's producer uses by default.
const compressLevel = 5

// zlibWriters reuses compressors: each holds about 256 KiB of deflate state.
var zlibWriters = sync.Pool{New: func() any {
	w, err := zlib.NewWriterLevel(nil, compressLevel)
	if err != nil {
		// The level is a valid constant; an error here is a programming error.
		panic(err)
	}
	return w
}}

// compressThreshold turns Options.CompressThreshold into the body size from which to compress:
// 0 means DefaultCompressThreshold and a negative value never compresses (-1).
func compressThreshold(opt int) int {
	switch {
	case opt == 0:
		return DefaultCompressThreshold
	case opt < 0:
		return -1
	}
	return opt
}

// sendBody returns the body and sysFlag to send for body, leaving body untouched. Like RocketMQ's
// producer it compresses bodies of at least threshold bytes with zlib at level 5 and marks them
// compressed with the zlib type. Unlike it, a body that does not shrink (already compressed or
// random data) is sent as it is: a compressed body larger than the original only costs consumers
// an inflate, and near 4 MiB it would exceed the broker's body limit and be refused.
func sendBody(body []byte, threshold int) ([]byte, int32) {
	if threshold < 0 || len(body) < threshold {
		return body, 0
	}
	var buf bytes.Buffer
	// Sized for the common case of a body that shrinks well; a larger result grows the buffer.
	buf.Grow(len(body)/4 + 64)
	w := zlibWriters.Get().(*zlib.Writer)
	w.Reset(&buf)
	// Writes into a bytes.Buffer cannot fail.
	_, _ = w.Write(body)
	_ = w.Close()
	w.Reset(nil)
	zlibWriters.Put(w)
	if buf.Len() >= len(body) {
		return body, 0
	}
	return buf.Bytes(), SysFlagCompressed | SysFlagZlib
}

// bodyAsIsKey marks a context under which sends store bodies as they are (see WithBodyAsIs).
type bodyAsIsKey struct{}

// WithBodyAsIs returns ctx under which every send stores the message body exactly as given,
// whatever its size, instead of compressing it from Options.CompressThreshold. A door whose
// consumers may not all be able to inflate a compressed body (the compressed flag travels with
// the stored message to every consumer of the topic) sends under it; the runtime's own threshold
// stays in force for every other send.
func WithBodyAsIs(ctx context.Context) context.Context {
	return context.WithValue(ctx, bodyAsIsKey{}, true)
}

// compressAtFor is the body size from which a send under ctx compresses: the runtime's
// threshold, or never (-1) under WithBodyAsIs.
func (r *Runtime) compressAtFor(ctx context.Context) int {
	if asIs, _ := ctx.Value(bodyAsIsKey{}).(bool); asIs {
		return -1
	}
	return r.compressAt
}
