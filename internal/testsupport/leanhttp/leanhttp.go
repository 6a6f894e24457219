// Package leanhttp is a lean HTTP/1.1 load generator for benchmarks of the send gateway, in the
// manner of wrk: one persistent connection that writes a request encoded once and reads each
// answer with a minimal parser. It still checks what a client must: the status line is 200, and
// the whole body is read, by Content-Length or by chunks, before the next request goes out. It
// exists because net/http's client, run in the same process as the gateway, takes about a third
// of the CPU the server needs; a deployment's clients run elsewhere.
package leanhttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// Client is one persistent connection posting one request over and over.
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	req  []byte
}

// Dial connects to the server of rawURL and encodes one POST of body to it.
func Dial(rawURL, contentType string, body []byte, headers map[string]string) (*Client, error) {
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
	return &Client{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), req: req.Bytes()}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Post sends the request and reads the whole answer, failing unless it is 200.
func (c *Client) Post() error {
	if _, err := c.conn.Write(c.req); err != nil {
		return err
	}
	return ReadAnswer(c.r)
}

// ErrNotOK is an answer other than 200 (its status line is in the wrapping error).
var ErrNotOK = errors.New("answer is not 200")

// ReadAnswer reads one HTTP/1.1 answer from r: status line, headers, and the body by its length
// or its chunks.
func ReadAnswer(r *bufio.Reader) error {
	status, err := r.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("reading the status line: %w", err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%w: %q", ErrNotOK, bytes.TrimSpace(status))
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
