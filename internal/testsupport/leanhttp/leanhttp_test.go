package leanhttp_test

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/detourmq/detour/internal/testsupport/leanhttp"
)

// TestLeanClientReadsWholeAnswersAndRefusesOthers proves the lean client reads an
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
			err := leanhttp.ReadAnswer(r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("first answer: %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if err := leanhttp.ReadAnswer(r); err != nil {
				t.Fatalf("the next answer did not parse: %v", err)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("bytes left after both answers (%v)", err)
			}
		})
	}
}
