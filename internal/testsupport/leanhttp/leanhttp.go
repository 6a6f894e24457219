package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"testing"
)

// leanClient is the throughput benchmark's lean load generator, in the manner of wrk: one
// persistent HTTP/1.1 connection that writes a request encoded once and reads each answer with a
// minimal parser. It still checks what a client must: the status line is 200, and the whole body
// is read, by Content-Length or by chunks, before the next request goes out. It exists because
// net/http's client, run in the same process as the gateway, takes about a third of the CPU the
// server needs; a deployment's clients run elsewhere.
type leanClient struct {
	conn net.Conn
	r    *bufio.Reader
	req  []byte
}

// dialLean connects to the server of rawURL and encodes one POST of body to it.
func dialLean(rawURL, contentType string, body []byte, headers map[string]string) (*leanClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, contentType, len(body))
	for k, v := range headers {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n")
	req.Write(body)
	return &leanClient{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), req: req.Bytes()}, nil
}

// Close closes the connection.
func (c *leanClient) Close() error { return c.conn.Close() }

// post sends the request and reads the whole answer, failing unless it is 200.
func (c *leanClient) post() error {
	if _, err := c.conn.Write(c.req); err != nil {
		return err
	}
	return readLeanAnswer(c.r)
}

// errNotOK is an answer other than 200 (its status line is in the wrapping error).
var errNotOK = errors.New("answer is not 200")

// readLeanAnswer reads one HTTP/1.1 answer from r: status line, headers, and the body by its
// length or its chunks.
func readLeanAnswer(r *bufio.Reader) error {
	status, err := r.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("reading the status line: %w", err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%w: %q", errNotOK, bytes.TrimSpace(status))
	}
	length, chunked := -1, false
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading a header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return fmt.Errorf("malformed header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		}
	}
	switch {
	case chunked:
		return discardChunks(r)
	case length >= 0:
		_, err := r.Discard(length)
		return err
	}
	return errors.New("an answer without Content-Length or chunks (the connection cannot be reused)")
}

// discardChunks reads a chunked body to its last chunk and the trailer's end.
func discardChunks(r *bufio.Reader) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading a chunk size: %w", err)
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseInt(string(sizeText), 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if size == 0 {
			return discardTrailer(r)
		}
		if _, err := r.Discard(int(size)); err != nil {
			return err
		}
		if crlf, err := r.ReadSlice('\n'); err != nil || string(crlf) != "\r\n" {
			return fmt.Errorf("a chunk not ended by CRLF (%v)", err)
		}
	}
}

// discardTrailer reads trailer lines up to the empty line that ends a chunked answer.
func discardTrailer(r *bufio.Reader) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("reading the trailer: %w", err)
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
}

// TestLeanClientReadsWholeAnswersAndRefusesOthers proves the benchmark's lean client reads an
// answer by its length or its chunks to the end, so the next answer on the connection parses,
// and refuses an answer that is not 200 or that it cannot delimit.
func TestLeanClientReadsWholeAnswersAndRefusesOthers(t *testing.T) {
	cases := []struct {
		name, answers string
		wantErr       bool
	}{
		{"by length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false},
		{"by chunks", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\nT: v\r\n\r\n", false},
		{"not 200", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", true},
		{"no length", "HTTP/1.1 200 OK\r\n\r\nhello", true},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", true},
		{"bad chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A good answer is followed by a second one that parses only if the first was read
			// whole; a bad one is all there is.
			if !tc.wantErr {
				tc.answers += "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
			}
			r := bufio.NewReader(bytes.NewBufferString(tc.answers))
			err := readLeanAnswer(r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("first answer: %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if err := readLeanAnswer(r); err != nil {
				t.Fatalf("the next answer did not parse: %v", err)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("bytes left after both answers (%v)", err)
			}
		})
	}
}
